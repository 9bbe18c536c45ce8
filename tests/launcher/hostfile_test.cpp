#include "launcher/hostfile.hpp"

#include <catch2/catch.hpp>

namespace dlaunch::launcher {
namespace {

struct Want {
  std::string host;
  std::optional<int> slots;
  std::vector<int> only = {};
};

void CheckHosts(const Result<std::vector<HostEntry>>& got, const std::vector<Want>& want) {
  INFO((got.ok() ? std::string("ok") : got.status().message()));
  REQUIRE(got.ok());
  REQUIRE(got->size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("entry " << i);
    CHECK((*got)[i].host == want[i].host);
    CHECK((*got)[i].slots == want[i].slots);
    CHECK((*got)[i].only_slots == want[i].only);
  }
}

std::string Error(const Result<std::vector<HostEntry>>& got) {
  REQUIRE_FALSE(got.ok());
  return got.status().message();
}

}  // namespace

TEST_CASE("hostfiles in Open MPI, DeepSpeed and host:N forms", "[hostfile]") {
  CheckHosts(ParseHostfile("# Open MPI\nn1 slots=4 max_slots=8\n\n  n2   slots=2  # trailing\n", "h"),
             {{"n1", 4}, {"n2", 2}});
  CheckHosts(ParseHostfile("worker-0 slots=8\nworker-1 slots=8", "h"), {{"worker-0", 8}, {"worker-1", 8}});
  CheckHosts(ParseHostfile("a:3\nb\r\n", "h"), {{"a", 3}, {"b", std::nullopt}});
}

TEST_CASE("a bad hostfile line is named by file and line", "[hostfile]") {
  struct Case {
    std::string text;
    std::string error;
  } cases[] = {
      {"n0 slots=2\nn1 slot=4\n", "hostfile hosts.txt:2: expected 'slots=N', got 'slot=4'"},
      {"n0 slots=2\nn1 slots=abc\n", "hostfile hosts.txt:2: expected a positive count in 'slots=abc'"},
      {"n0 slots=0\n", "hostfile hosts.txt:1: expected a positive count in 'slots=0'"},
      {"n0:x\n", "hostfile hosts.txt:1: expected HOST:SLOTS, got 'n0:x'"},
      {"n0\n# c\nn0 slots=2\n", "hostfile hosts.txt:3: host 'n0' is listed twice (first at hostfile hosts.txt:1)"},
      {"# only a comment\n\n", "hostfile hosts.txt: no hosts"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    CHECK(Error(ParseHostfile(c.text, "hosts.txt")) == c.error);
  }
}

TEST_CASE("mpirun's -H list", "[hostfile]") {
  CheckHosts(ParseHostList("n1:4,n2:4", "-H"), {{"n1", 4}, {"n2", 4}});
  CheckHosts(ParseHostList("n1,n2", "-H"), {{"n1", std::nullopt}, {"n2", std::nullopt}});
  CHECK(Error(ParseHostList("n1:4,,n2", "-H")) == "-H: expected HOST[:SLOTS],..., got 'n1:4,,n2'");
  CHECK(Error(ParseHostList("n1:0", "-H")) == "-H: expected HOST:SLOTS, got 'n1:0'");
  CHECK(Error(ParseHostList("n1,n1:2", "-H")) == "-H 'n1:2': host 'n1' is listed twice (first at -H 'n1')");
}

TEST_CASE("DeepSpeed's --include and --exclude pick hosts and slots", "[hostfile]") {
  auto hosts = [] { return *ParseHostfile("w0 slots=4\nw1 slots=4\nw2 slots=4\n", "h"); };
  CheckHosts(FilterHosts(hosts(), "", ""), {{"w0", 4}, {"w1", 4}, {"w2", 4}});
  CheckHosts(FilterHosts(hosts(), "w0:0,2@w2", ""), {{"w0", 4, {0, 2}}, {"w2", 4}});
  CheckHosts(FilterHosts(hosts(), "", "w1"), {{"w0", 4}, {"w2", 4}});
  CheckHosts(FilterHosts(hosts(), "", "w0:1@w2:0,3"), {{"w0", 4, {0, 2, 3}}, {"w1", 4}, {"w2", 4, {1, 2}}});
  // Excluding every slot of a host leaves the host out.
  CheckHosts(FilterHosts(hosts(), "", "w1:0,1,2,3"), {{"w0", 4}, {"w2", 4}});

  CHECK(Error(FilterHosts(hosts(), "w9", "")) == "--include: host 'w9' is not in the node list");
  CHECK(Error(FilterHosts(hosts(), "w0:4", "")) == "--include: host 'w0' has slots 0-3, not 4");
  CHECK(Error(FilterHosts(hosts(), "w0:x", "")) == "--include: expected HOST[:SLOT,SLOT][@HOST...], got 'w0:x'");
  CHECK(Error(FilterHosts(hosts(), "w0", "w1")) == "--include and --exclude: give one of them, not both");
  CHECK(Error(FilterHosts(hosts(), "", "w0@w1@w2")) == "--exclude w0@w1@w2: no host is left");
  CHECK(Error(FilterHosts(*ParseHostList("a,b", "-H"), "a:0", "")) == "--include: host 'a' has no slot count to pick from");
}

TEST_CASE("workers per node: picked slots, else --nproc-per-node, else the list's slots", "[hostfile]") {
  CHECK(WorkersOn(HostEntry{"a", 4, {}}, false, 1) == 4);
  CHECK(WorkersOn(HostEntry{"a", 4, {}}, true, 2) == 2);
  CHECK(WorkersOn(HostEntry{"a", std::nullopt, {}}, false, 1) == 1);
  CHECK(WorkersOn(HostEntry{"a", std::nullopt, {}}, true, 3) == 3);
  CHECK(WorkersOn(HostEntry{"a", 8, {1, 5}}, true, 8) == 2);
}

}  // namespace dlaunch::launcher
