#include <string>
#include <vector>

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include "envmap/worker_env.hpp"

namespace dlaunch::envmap {
namespace {

namespace json = boost::json;

// chief:1,worker:2,ps:1,evaluator:1 over nodes of 2 and 3 processes:
//   node a (10.0.0.1): rank 0 chief 0 (port 2000), rank 1 worker 0 (2001)
//   node b (10.0.0.2): rank 2 worker 1 (3000), rank 3 ps 0 (3001), rank 4 evaluator 0 (3002)
// The workers straddle the two nodes.
JobLayout FullJob(int node_rank) {
  JobLayout layout;
  layout.nodes = {{"a", "10.0.0.1", 2, {2000, 2001}}, {"b", "10.0.0.2", 3, {3000, 3001, 3002}}};
  layout.node_rank = node_rank;
  layout.master_addr = "10.0.0.1";
  layout.master_port = 29500;
  layout.roles = {{"chief", 1, {}}, {"worker", 2, {}}, {"ps", 1, {}}, {"evaluator", 1, {}}};
  return layout;
}

std::vector<std::string> Strings(const json::value& v) {
  std::vector<std::string> out;
  for (const json::value& item : v.as_array()) out.emplace_back(item.as_string().c_str());
  return out;
}

TEST_CASE("TF_CONFIG for every task of a chief/worker/ps/evaluator job", "[envmap][tf]") {
  static const struct {
    int node_rank;
    int local_rank;
    const char* type;
    int index;
  } kCases[] = {
      {0, 0, "chief", 0},  {0, 1, "worker", 0},                          // node a
      {1, 0, "worker", 1}, {1, 1, "ps", 0},     {1, 2, "evaluator", 0},  // node b
  };
  const std::vector<std::string> chief = {"10.0.0.1:2000"};
  const std::vector<std::string> worker = {"10.0.0.1:2001", "10.0.0.2:3000"};
  const std::vector<std::string> ps = {"10.0.0.2:3001"};
  for (const auto& c : kCases) {
    INFO("node " << c.node_rank << " local " << c.local_rank);
    JobLayout layout = FullJob(c.node_rank);
    REQUIRE(Validate(layout).ok());
    WorkerSlot slot = LocalSlots(layout)[static_cast<size_t>(c.local_rank)];
    std::string text = TfConfig(layout, slot);
    INFO(text);

    json::value config = json::parse(text);
    const json::object& top = config.as_object();
    CHECK(top.size() == 3);
    const json::object& cluster = top.at("cluster").as_object();
    CHECK(cluster.size() == 3);
    CHECK(Strings(cluster.at("chief")) == chief);
    CHECK(Strings(cluster.at("worker")) == worker);
    CHECK(Strings(cluster.at("ps")) == ps);
    CHECK_FALSE(cluster.contains("evaluator"));

    const json::object& task = top.at("task").as_object();
    CHECK(task.size() == 2);
    CHECK(task.at("type").as_string() == c.type);
    CHECK(task.at("index").as_int64() == c.index);
    CHECK(top.at("environment").as_string() == "cloud");
  }
}

TEST_CASE("TF_CONFIG is compact JSON in TensorFlow's key order", "[envmap][tf]") {
  JobLayout layout = FullJob(1);
  CHECK(TfConfig(layout, LocalSlots(layout)[0]) ==
        R"({"cluster":{"chief":["10.0.0.1:2000"],"worker":["10.0.0.1:2001","10.0.0.2:3000"],)"
        R"("ps":["10.0.0.2:3001"]},"task":{"type":"worker","index":1},"environment":"cloud"})");
}

TEST_CASE("TF_CONFIG cluster order does not depend on the order roles are listed", "[envmap][tf]") {
  // ps first: rank 0 is the ps on node a, the chief is the last task on node b.
  JobLayout layout = FullJob(1);
  layout.roles = {{"ps", 1, {}}, {"worker", 3, {}}, {"chief", 1, {}}};
  REQUIRE(Validate(layout).ok());
  WorkerSlot slot = LocalSlots(layout)[2];
  CHECK(slot.role == "chief");
  CHECK(TfConfig(layout, slot) ==
        R"({"cluster":{"chief":["10.0.0.2:3002"],"worker":["10.0.0.1:2001","10.0.0.2:3000","10.0.0.2:3001"],)"
        R"("ps":["10.0.0.1:2000"]},"task":{"type":"chief","index":0},"environment":"cloud"})");
}

TEST_CASE("TF_CONFIG leaves roles absent from the job out of the cluster", "[envmap][tf]") {
  static const struct {
    std::vector<RoleSpec> roles;
    const char* cluster;  // the "cluster" object as compact JSON
  } kCases[] = {
      {{{"worker", 5, {}}},
       R"({"worker":["10.0.0.1:2000","10.0.0.1:2001","10.0.0.2:3000","10.0.0.2:3001","10.0.0.2:3002"]})"},
      {{{"chief", 1, {}}, {"worker", 4, {}}},
       R"({"chief":["10.0.0.1:2000"],"worker":["10.0.0.1:2001","10.0.0.2:3000","10.0.0.2:3001","10.0.0.2:3002"]})"},
      {{{"worker", 4, {}}, {"evaluator", 1, {}}},
       R"({"worker":["10.0.0.1:2000","10.0.0.1:2001","10.0.0.2:3000","10.0.0.2:3001"]})"},
  };
  for (const auto& c : kCases) {
    INFO(c.cluster);
    JobLayout layout = FullJob(0);
    layout.roles = c.roles;
    REQUIRE(Validate(layout).ok());
    json::value config = json::parse(TfConfig(layout, LocalSlots(layout)[0]));
    CHECK(json::serialize(config.at("cluster")) == c.cluster);
  }
}

TEST_CASE("TF_CONFIG brackets IPv6 addresses", "[envmap][tf]") {
  JobLayout layout;
  layout.nodes = {{"a", "fd00::1", 1, {2000}}, {"b", "[fd00::2]", 1, {3000}}};
  layout.roles = {{"worker", 2, {}}};
  REQUIRE(Validate(layout).ok());
  json::value config = json::parse(TfConfig(layout, LocalSlots(layout)[0]));
  CHECK(Strings(config.at("cluster").at("worker")) == std::vector<std::string>{"[fd00::1]:2000", "[fd00::2]:3000"});
}

}  // namespace
}  // namespace dlaunch::envmap
