// RunLoadSim (what `rdzv_load --no-sockets` runs) at a small N, and its
// AssignmentChecker: a wrong or incomplete assignment must be caught.
#include "bench/load_sim.hpp"

#include <catch2/catch.hpp>

namespace dlaunch::rendezvous {

namespace {

// Agent i's correct assignment among `n` agents when node rank = agent index.
Assignment SimAssignment(int n, int agent) {
  Assignment a;
  a.generation = 1;
  a.node_rank = agent;
  a.nodes = {envmap::Node{AssignmentChecker::HostOf(agent), "10.0.0.1", AssignmentChecker::NprocOf(agent), {}}};
  a.master_addr = "10.0.0.0";
  a.master_port = 29500;
  a.nnodes = n;
  for (int i = 0; i < n; ++i) {
    if (i < agent) a.rank_offset += AssignmentChecker::NprocOf(i);
    a.world_size += AssignmentChecker::NprocOf(i);
  }
  return a;
}

}  // namespace

TEST_CASE("load sim: a job of simulated agents is assigned correctly and ends with 0", "[load_sim][coordinator]") {
  LoadSimOptions o;
  o.agents = 1500;
  o.window = 256;  // several batches of handshakes
  Result<LoadSimResult> r = RunLoadSim(o);
  REQUIRE(r.ok());
  // Hello, Challenge, Proof, Join, Assignment, Heartbeat both ways, Done both ways.
  CHECK(r->frames == 9u * 1500);
  o.token.clear();
  o.agents = 3;
  r = RunLoadSim(o);
  REQUIRE(r.ok());
  CHECK(r->frames == 8u * 3);  // no Proof
  o.agents = 0;
  CHECK(RunLoadSim(o).status().message() == "load sim: 0 agents, window 256 (each must be at least 1)");
}

TEST_CASE("load sim: the checker passes a correct assignment in any order", "[load_sim]") {
  AssignmentChecker check(4);
  for (int agent : {2, 0, 3, 1}) REQUIRE(check.Add(agent, SimAssignment(4, agent)).ok());
  CHECK(check.Finish().ok());
}

TEST_CASE("load sim: the checker catches a wrong or incomplete assignment", "[load_sim]") {
  AssignmentChecker check(4);
  REQUIRE(check.Add(0, SimAssignment(4, 0)).ok());
  Assignment twice = SimAssignment(4, 1);
  twice.node_rank = 0;
  CHECK(check.Add(1, twice).message() == "agent sim-1: node rank 0 was already given to sim-0");
  Assignment world = SimAssignment(4, 1);
  world.world_size = 9;
  CHECK(check.Add(1, world).message() == "agent sim-1: world size 9, expected 10");
  Assignment other = SimAssignment(4, 2);
  CHECK(check.Add(1, other).message() == "agent sim-1: 1 rows, the first 'sim-2' with nproc 3; expected only its own");
  Assignment gen = SimAssignment(4, 1);
  gen.generation = 2;
  CHECK(check.Add(1, gen).message() == "agent sim-1: generation 2, the others 1");
  Assignment out = SimAssignment(4, 1);
  out.node_rank = 4;
  CHECK(check.Add(1, out).message() == "agent sim-1: node rank 4 outside 0..3");
  REQUIRE(check.Add(1, SimAssignment(4, 1)).ok());
  CHECK(check.Finish().message() == "node rank 2 was given to no agent");

  // Right ranks, wrong offsets: only the whole can tell.
  AssignmentChecker offsets(2);
  Assignment a0 = SimAssignment(2, 0), a1 = SimAssignment(2, 1);
  a1.rank_offset = 0;
  REQUIRE(offsets.Add(0, a0).ok());
  REQUIRE(offsets.Add(1, a1).ok());
  CHECK(offsets.Finish().message() == "agent sim-1: rank offset 0 at node rank 1, expected 1");
}

}  // namespace dlaunch::rendezvous
