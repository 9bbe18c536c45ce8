// Node rank rules: the pure functions, then each rule through the coordinator.
#include "rendezvous/ranks.hpp"

#include <catch2/catch.hpp>

#include "envmap/layout.hpp"
#include "tests/rendezvous/coordinator_harness.hpp"

namespace dlaunch::rendezvous {

using testing::Harness;
using testing::MakeJoin;
using testing::Opts;
using namespace std::chrono_literals;

TEST_CASE("NodeRanks: slots first, arrivals fill the gaps, then gaps close", "[coordinator][ranks]") {
  static const struct {
    const char* what;
    std::vector<RankClaim> claims;
    std::vector<int> ranks;
  } kCases[] = {
      {"arrival order only", {{-1, 7}, {-1, 3}, {-1, 5}}, {2, 0, 1}},
      {"slots only", {{2, 0}, {0, 1}, {1, 2}}, {2, 0, 1}},
      {"arrivals around a slot", {{1, 0}, {-1, 1}, {-1, 2}}, {1, 0, 2}},
      {"a gap closes up", {{3, 0}, {-1, 1}}, {1, 0}},
      {"a missing rank 0", {{1, 0}, {2, 1}}, {0, 1}},
      {"empty", {}, {}},
  };
  for (const auto& c : kCases) {
    INFO(c.what);
    CHECK(NodeRanks(c.claims) == c.ranks);
  }
}

TEST_CASE("ClaimSlot refuses conflicts and hosts outside the list", "[coordinator][ranks]") {
  std::vector<std::string> list = {"n1", "n2", "n2"};
  auto join = [](std::string host, int requested = -1, int position = -1) {
    Join j = MakeJoin(host);
    j.requested_node_rank = requested;
    j.list_position = position;
    return j;
  };
  CHECK(*ClaimSlot(join("n2"), list, 3, {}) == 1);
  CHECK(*ClaimSlot(join("n2"), list, 3, {{1, "n2"}}) == 2);
  CHECK(*ClaimSlot(join("n2", -1, 2), list, 3, {}) == 2);
  CHECK(*ClaimSlot(join("x", 0), {}, 3, {}) == 0);
  CHECK(*ClaimSlot(join("x"), {}, 3, {}) == -1);
  CHECK(*ClaimSlot(join("x", -1, 1), {}, 3, {}) == 1);
  Join by_addr = join("weird");
  by_addr.addrs = {"10.9.9.9", "n1"};
  CHECK(*ClaimSlot(by_addr, list, 3, {}) == 0);

  static const struct {
    Join join;
    std::vector<std::string> list;
    std::map<int, std::string> taken;
    const char* problem;
  } kCases[] = {
      {join("z"), list, {}, "host 'z' is not in the node list (n1, n2, n2)"},
      {join("n2"), list, {{1, "n2"}, {2, "n2"}}, "every node list position of host 'n2' is already taken"},
      {join("n1", -1, 1), list, {}, "list position 1 is 'n2' in the node list, not 'n1'"},
      {join("n1", -1, 5), list, {}, "list position 5 is outside the node list of 3 hosts"},
      {join("n2", -1, 1), list, {{1, "n2"}}, "node list position 1 ('n2') is already taken by host 'n2'"},
      {join("b", 1), {}, {{1, "c"}}, "node rank 1 is already taken by host 'c'"},
      {join("b", 3), {}, {}, "node rank 3 is outside 0..2 (at most 3 nodes)"},
      {join("b", -1, 0), {}, {{0, "a"}}, "list position 0 is already taken by host 'a'"},
  };
  for (const auto& c : kCases) {
    INFO(c.problem);
    Result<int> slot = ClaimSlot(c.join, c.list, 3, c.taken);
    REQUIRE_FALSE(slot.ok());
    CHECK(slot.status().message() == c.problem);
  }
  CHECK(NameList({"a", "b", "c"}, 2) == "a, b, ... (3 in all)");
}

TEST_CASE("ClaimSlot finds a host by its name or address in an indexed list of 100,000", "[coordinator][ranks]") {
  // A walk of the list for every join made 100,000 joins cost 5e9 compares;
  // the index makes each a lookup.
  std::vector<std::string> hosts;
  for (int i = 0; i < 100'000; ++i) hosts.push_back("h" + std::to_string(i));
  hosts.push_back("h7");  // listed twice: the second position once the first is taken
  NodeList list(hosts);
  std::map<int, std::string> taken;
  for (int i = 99'999; i >= 0; --i) {
    Join j = MakeJoin("sim");
    j.addrs = {"10.0.0.1", "h" + std::to_string(i)};
    Result<int> slot = ClaimSlot(j, list, 100'001, taken);
    REQUIRE(slot.ok());
    REQUIRE(*slot == i);
    taken[*slot] = "sim";
  }
  CHECK(*ClaimSlot(MakeJoin("h7"), list, 100'001, taken) == 100'000);
  CHECK(list.PositionsOf("h7") == std::vector<int>{7, 100'000});
  CHECK(list.PositionsOf("nowhere").empty());
}

TEST_CASE("rule 3: without a list or ranks, the order of Join messages", "[coordinator][ranks]") {
  Harness h(Opts(3, 3));
  ConnId c = h.JoinAs(MakeJoin("c"));
  ConnId a = h.JoinAs(MakeJoin("a"));
  ConnId b = h.JoinAs(MakeJoin("b"));
  CHECK(h.RanksByHost({a, b, c}) == std::map<std::string, int>{{"c", 0}, {"a", 1}, {"b", 2}});
}

TEST_CASE("arrival means the Join, not the connection", "[coordinator][ranks]") {
  Harness h(Opts(2, 2));
  ConnId first = h.Handshake("");
  ConnId second = h.JoinAs(MakeJoin("second"));
  h.Send(first, MakeJoin("first"));
  CHECK(h.RanksByHost({first, second}) == std::map<std::string, int>{{"second", 0}, {"first", 1}});
}

TEST_CASE("rule 2: an explicit --node-rank; a conflict is refused", "[coordinator][ranks]") {
  CoordinatorOptions o = Opts(3, 4);
  o.heartbeat_timeout = 1h;  // nobody beats in this test
  Harness h(o);
  auto ranked = [](std::string host, int rank) {
    Join j = MakeJoin(host);
    j.requested_node_rank = rank;
    return j;
  };
  ConnId a = h.JoinAs(ranked("a", 2));
  ConnId b = h.JoinAs(ranked("b", 0));
  ConnId c = h.JoinAs(ranked("c", 1));
  ConnId d = h.JoinAs(ranked("d", 1));
  CHECK(h.closed.at(d) == "node rank 1 is already taken by host 'c'");
  h.TickAt(30s);  // last call over
  CHECK(h.RanksByHost({a, b, c}) == std::map<std::string, int>{{"b", 0}, {"c", 1}, {"a", 2}});
}

TEST_CASE("explicit ranks and arrivals mix; a gap closes up", "[coordinator][ranks]") {
  CoordinatorOptions o = Opts(2, 4);
  o.heartbeat_timeout = 1h;
  Harness h(o);
  Join high = MakeJoin("high");
  high.requested_node_rank = 3;
  ConnId x = h.JoinAs(high);
  ConnId y = h.JoinAs(MakeJoin("arrived"));
  h.TickAt(30s);
  CHECK(h.RanksByHost({x, y}) == std::map<std::string, int>{{"arrived", 0}, {"high", 1}});
}

TEST_CASE("rule 1: the node list position wins over arrival and --node-rank", "[coordinator][ranks]") {
  CoordinatorOptions o = Opts(3, 3);
  o.node_list = {"n1", "n2", "n3"};
  Harness h(o);
  ConnId z = h.JoinAs(MakeJoin("z"));
  CHECK(h.closed.at(z) == "host 'z' is not in the node list (n1, n2, n3)");
  Join n3 = MakeJoin("n3");
  n3.requested_node_rank = 0;  // ignored: the list decides
  ConnId c = h.JoinAs(n3);
  ConnId a = h.JoinAs(MakeJoin("n1"));
  Join by_addr = MakeJoin("localhost");
  by_addr.addrs = {"n2"};
  ConnId b = h.JoinAs(by_addr);
  CHECK(h.RanksByHost({a, b, c}) == std::map<std::string, int>{{"n1", 0}, {"localhost", 1}, {"n3", 2}});
}

TEST_CASE("one host listed several times: the agent's list position picks", "[coordinator][ranks]") {
  CoordinatorOptions o = Opts(2, 2);
  o.node_list = {"box", "box"};
  Harness h(o);
  Join second = MakeJoin("box");
  second.list_position = 1;
  second.addrs = {"10.0.0.2"};
  Join first = MakeJoin("box");
  first.list_position = 0;
  first.addrs = {"10.0.0.1"};
  ConnId s = h.JoinAs(second);
  ConnId f = h.JoinAs(first);
  CHECK(h.LastAssignment(s).node_rank == 1);
  CHECK(h.LastAssignment(f).node_rank == 0);
  CHECK(h.LastAssignment(f).master_addr == "10.0.0.1");
}

TEST_CASE("the table gives rank offsets by prefix sums and node 0's master endpoint", "[coordinator][ranks]") {
  Harness h(Opts(3, 3));
  Join a = MakeJoin("a", 2);
  a.addrs = {"10.0.0.1", "192.168.0.1"};
  a.master_port_hint = 41000;
  Join b = MakeJoin("b", 3);
  b.master_port_hint = 42000;  // only node 0's hint counts
  b.task_ports = {3000, 3001, 3002};
  ConnId ca = h.JoinAs(a);
  ConnId cb = h.JoinAs(b);
  ConnId cc = h.JoinAs(MakeJoin("c", 1));
  Assignment got = h.LastAssignment(cb);
  CHECK(got.node_rank == 1);
  CHECK(got.master_addr == "10.0.0.1");
  CHECK(got.master_port == 41000);
  REQUIRE(got.nodes.size() == 3);
  CHECK(got.nodes[1].task_ports == std::vector<int>{3000, 3001, 3002});
  envmap::JobLayout layout;
  layout.nodes = got.nodes;
  CHECK(envmap::WorldSize(layout) == 6);
  CHECK(envmap::RankOffset(layout, 0) == 0);
  CHECK(envmap::RankOffset(layout, 1) == 2);
  CHECK(envmap::RankOffset(layout, 2) == 5);
  // Every node gets the same table.
  CHECK(h.LastAssignment(ca).nodes.size() == 3);
  CHECK(h.LastAssignment(cc).nodes[2].addr == "10.1.c");
}

TEST_CASE("master port: the option, else node 0's hint, else 29500", "[coordinator][ranks]") {
  static const struct {
    int option;
    int hint;
    int port;
  } kCases[] = {{0, 0, 29500}, {0, 41000, 41000}, {6105, 41000, 6105}};
  for (const auto& c : kCases) {
    CoordinatorOptions o = Opts(1, 1);
    o.master_port = c.option;
    Harness h(o);
    Join j = MakeJoin("a");
    j.master_port_hint = c.hint;
    ConnId a = h.JoinAs(j);
    CHECK(h.LastAssignment(a).master_port == c.port);
  }
}

}  // namespace dlaunch::rendezvous
