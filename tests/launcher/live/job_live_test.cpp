// The live view of a whole job: every node's status rows merged from an
// on-demand query's answer (rendezvous input: checked, never trusted).
#include "launcher/live/job_live.hpp"

#include <boost/json/serialize.hpp>
#include <catch2/catch.hpp>

namespace dlaunch::launcher {
namespace {

namespace rdzv = dlaunch::rendezvous;

rdzv::NodeStacks Node(int node_rank, const std::string& host, int first, int nproc, std::vector<std::string> items) {
  rdzv::NodeStacks n;
  n.node_rank = node_rank;
  n.host = host;
  n.first_rank = first;
  n.nproc = nproc;
  n.answered = true;
  n.items = std::move(items);
  return n;
}

std::vector<long> RanksOf(const boost::json::array& rows) {
  std::vector<long> out;
  for (const auto& r : rows) out.push_back(static_cast<long>(r.as_object().at("rank").as_int64()));
  return out;
}

}  // namespace

TEST_CASE("job live: every node's rows, by rank", "[job_live]") {
  rdzv::QueryAnswered a{1, "status", {}, {}};
  a.nodes.push_back(Node(0, "a", 0, 2, {R"({"rank":1,"host":"a"})", R"({"rank":0,"host":"a"})"}));
  a.nodes.push_back(Node(1, "b", 2, 2, {R"({"rank":3})", R"({"rank":2})"}));
  std::vector<std::string> missing;
  boost::json::array rows = RowsOfAnswer(a, missing);
  CHECK(RanksOf(rows) == std::vector<long>{0, 1, 2, 3});
  CHECK(missing.empty());
}

TEST_CASE("job live: a silent node and bad items are named, never shown", "[job_live]") {
  rdzv::QueryAnswered a{1, "status", {}, {}};
  a.nodes.push_back(
      Node(0, "a", 0, 2, {R"({"rank":0})", "junk", R"({"rank":5})", R"({"rank":0})", "[1]", std::string(100, '[')}));
  rdzv::NodeStacks silent = Node(1, "b", 2, 2, {});
  silent.answered = false;
  silent.problem = "no answer within 2s";
  a.nodes.push_back(silent);
  rdzv::NodeStacks one = Node(2, "c", 4, 1, {});
  one.answered = false;
  one.problem = "lost (connection closed)";
  a.nodes.push_back(one);
  std::vector<std::string> missing;
  boost::json::array rows = RowsOfAnswer(a, missing);
  CHECK(RanksOf(rows) == std::vector<long>{0});
  REQUIRE(missing.size() == 3);
  CHECK(missing[0].starts_with("node 0 (a): 5 items of its answer are not a row (item 1: not JSON: "));
  CHECK(missing[1] == "node 1 (b), ranks 2-3: no answer within 2s");
  CHECK(missing[2] == "node 2 (c), rank 4: lost (connection closed)");
}

}  // namespace dlaunch::launcher
