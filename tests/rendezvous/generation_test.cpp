// PlanGeneration and AssignmentFor: node ranks, the table, the master endpoint,
// the size checks, and what each agent is sent.
#include "rendezvous/generation.hpp"

#include <climits>

#include <catch2/catch.hpp>

namespace dlaunch::rendezvous {

namespace {

Join GenJoin(const std::string& host, int nproc, int port_hint = 0, int wants_table = 0) {
  Join j;
  j.run_id = "job42";
  j.host = host;
  j.addrs = {"10.2." + host};
  j.nproc = nproc;
  j.master_port_hint = port_hint;
  j.wants_table = wants_table;
  return j;
}

GenerationSettings GenSettings(int master_port = 0) { return {3, 2, "job42", master_port, 29500}; }

}  // namespace

TEST_CASE("generation: ranks by slot, then arrival; table, offsets and world size", "[generation]") {
  Join a = GenJoin("a", 2, 4000), b = GenJoin("b", 3, 5000), c = GenJoin("c", 1);
  // b holds slot 0; a and c fill the rest in arrival order (c arrived first).
  Generation g = PlanGeneration({{&a, -1, 5}, {&b, 0, 9}, {&c, -1, 1}}, GenSettings());
  CHECK(g.problem.empty());
  CHECK(g.node_ranks == std::vector<int>{2, 0, 1});
  REQUIRE(g.table.size() == 3);
  CHECK(g.table[0].host == "b");
  CHECK(g.table[1].host == "c");
  CHECK(g.table[2].addr == "10.2.a");
  CHECK(g.rank_offsets == std::vector<int>{0, 3, 4});
  CHECK(g.workers == 6);
  CHECK(g.whole.generation == 3);
  CHECK(g.whole.restart_count == 2);
  CHECK(g.whole.run_id == "job42");
  CHECK(g.whole.master_addr == "10.2.b");
  CHECK(g.whole.master_port == 5000);  // node rank 0's hint
  CHECK(g.whole.nnodes == 3);
  CHECK(g.whole.world_size == 6);
  CHECK(g.whole.nodes.empty());  // no member asked for the table: no copy of it is made
  CHECK(g.own_row.nodes.empty());
  c.wants_table = 1;
  CHECK(PlanGeneration({{&a, -1, 5}, {&b, 0, 9}, {&c, -1, 1}}, GenSettings()).whole.nodes.size() == 3);
}

TEST_CASE("generation: the master port is the option, else node 0's hint, else the default", "[generation]") {
  Join hinted = GenJoin("a", 1, 4000), plain = GenJoin("a", 1);
  CHECK(PlanGeneration({{&hinted, -1, 0}}, GenSettings(6000)).whole.master_port == 6000);
  CHECK(PlanGeneration({{&hinted, -1, 0}}, GenSettings()).whole.master_port == 4000);
  CHECK(PlanGeneration({{&plain, -1, 0}}, GenSettings()).whole.master_port == 29500);
}

TEST_CASE("generation: an agent gets the whole table only when it asked", "[generation]") {
  Join a = GenJoin("a", 2), b = GenJoin("b", 3);
  Generation g = PlanGeneration({{&a, -1, 0}, {&b, -1, 1}}, GenSettings());
  Assignment own = AssignmentFor(g, 1, false);
  CHECK(own.node_rank == 1);
  CHECK(own.rank_offset == 2);
  REQUIRE(own.nodes.size() == 1);
  CHECK(own.nodes[0].host == "b");
  CHECK(own.world_size == 5);
  CHECK(own.nnodes == 2);
  Assignment whole = AssignmentFor(g, 1, true);
  CHECK(whole.nodes.size() == 2);
  CHECK(whole.rank_offset == 2);
  // Apart from the table they are the same message.
  whole.nodes = own.nodes;
  CHECK(Encode(Message(whole)) == Encode(Message(own)));
}

TEST_CASE("generation: a world size over 2^31-1 or a table over the frame cap cannot run", "[generation]") {
  Join big = GenJoin("a", INT_MAX), one = GenJoin("b", 1);
  Generation g = PlanGeneration({{&big, -1, 0}, {&one, -1, 1}}, GenSettings());
  CHECK(g.problem == "2 nodes ask for 2147483648 workers in all, over the cap of 2147483647");
  CHECK(g.table.size() == 2);

  // Two rows of 600 KB each: too big for one frame, but only when someone wants it.
  Join wide_a = GenJoin(std::string(600'000, 'a'), 1), wide_b = GenJoin(std::string(600'000, 'b'), 1);
  CHECK(PlanGeneration({{&wide_a, -1, 0}, {&wide_b, -1, 1}}, GenSettings()).problem.empty());
  wide_b.wants_table = 1;
  std::string problem = PlanGeneration({{&wide_a, -1, 0}, {&wide_b, -1, 1}}, GenSettings()).problem;
  CHECK_THAT(problem, Catch::Matchers::StartsWith("the node table of 2 nodes takes "));
  CHECK_THAT(problem, Catch::Matchers::EndsWith(" bytes, over the frame cap of 1048576"));
}

}  // namespace dlaunch::rendezvous
