#include "envmap/layout.hpp"

#include <array>

#include <catch2/catch.hpp>

#include "tests/envmap/fixtures.hpp"

namespace dlaunch::envmap {
namespace {

using testing::ThreeNodes;

// chief:1,worker:3,ps:1 over nodes of 2 and 3 processes, each task with its own port.
JobLayout TfJob(int node_rank) {
  JobLayout layout;
  layout.nodes = {{"a", "10.0.0.1", 2, {2000, 2001}}, {"b", "10.0.0.2", 3, {3000, 3001, 3002}}};
  layout.node_rank = node_rank;
  layout.roles = {{"chief", 1, {}}, {"worker", 3, {}}, {"ps", 1, {}}};
  return layout;
}

TEST_CASE("Find returns the value of a name, or nullptr", "[envmap][layout]") {
  EnvVars vars = {{"RANK", "3"}, {"EMPTY", ""}, {"WORLD_SIZE", "8"}};
  REQUIRE(Find(vars, "RANK") != nullptr);
  CHECK(*Find(vars, "RANK") == "3");
  CHECK(*Find(vars, "WORLD_SIZE") == "8");
  REQUIRE(Find(vars, "EMPTY") != nullptr);
  CHECK(Find(vars, "EMPTY")->empty());
  CHECK(Find(vars, "rank") == nullptr);
  CHECK(Find(vars, "LOCAL_RANK") == nullptr);
  CHECK(Find({}, "RANK") == nullptr);
}

TEST_CASE("WorldSize and RankOffset sum nproc in node-rank order", "[envmap][layout]") {
  JobLayout layout = ThreeNodes(0);
  CHECK(WorldSize(layout) == 6);
  static const struct {
    int node_rank;
    int offset;
  } kCases[] = {{0, 0}, {1, 2}, {2, 5}, {3, 6}};
  for (const auto& c : kCases) {
    INFO("node_rank " << c.node_rank);
    CHECK(RankOffset(layout, c.node_rank) == c.offset);
  }
  JobLayout single;
  single.nodes = {{"solo", "127.0.0.1", 4, {}}};
  CHECK(WorldSize(single) == 4);
  CHECK(RankOffset(single, 0) == 0);
}

TEST_CASE("LocalSlots without roles: one role spanning the job", "[envmap][layout]") {
  static const struct {
    int node_rank;
    std::vector<int> ranks;  // global rank of local rank 0, 1, ...
  } kCases[] = {
      {0, {0, 1}},
      {1, {2, 3, 4}},
      {2, {5}},
  };
  for (const auto& c : kCases) {
    INFO("node_rank " << c.node_rank);
    JobLayout layout = ThreeNodes(c.node_rank);
    std::vector<WorkerSlot> slots = LocalSlots(layout);
    REQUIRE(slots.size() == c.ranks.size());
    for (size_t i = 0; i < slots.size(); ++i) {
      INFO("local_rank " << i);
      CHECK(slots[i].local_rank == static_cast<int>(i));
      CHECK(slots[i].rank == c.ranks[i]);
      CHECK(slots[i].role == "default");
      CHECK(slots[i].role_rank == c.ranks[i]);
      CHECK(slots[i].role_world_size == 6);
      CHECK(slots[i].port == 0);
    }
  }
}

TEST_CASE("LocalSlots uses the layout's --role name", "[envmap][layout]") {
  JobLayout layout = ThreeNodes(1);
  layout.role = "trainer";
  layout.nodes[1].task_ports = {7001, 7002, 7003};
  std::vector<WorkerSlot> slots = LocalSlots(layout);
  REQUIRE(slots.size() == 3);
  for (size_t i = 0; i < slots.size(); ++i) {
    CHECK(slots[i].role == "trainer");
    CHECK(slots[i].port == 7001 + static_cast<int>(i));
  }
}

TEST_CASE("LocalSlots gives roles consecutive global ranks across nodes", "[envmap][layout]") {
  struct Want {
    int rank;
    const char* role;
    int role_rank;
    int role_world_size;
    int port;
  };
  static const struct {
    int node_rank;
    std::vector<Want> slots;
  } kCases[] = {
      {0, {{0, "chief", 0, 1, 2000}, {1, "worker", 0, 3, 2001}}},
      {1, {{2, "worker", 1, 3, 3000}, {3, "worker", 2, 3, 3001}, {4, "ps", 0, 1, 3002}}},
  };
  for (const auto& c : kCases) {
    INFO("node_rank " << c.node_rank);
    JobLayout layout = TfJob(c.node_rank);
    REQUIRE(Validate(layout).ok());
    std::vector<WorkerSlot> slots = LocalSlots(layout);
    REQUIRE(slots.size() == c.slots.size());
    for (size_t i = 0; i < slots.size(); ++i) {
      INFO("local_rank " << i);
      CHECK(slots[i].local_rank == static_cast<int>(i));
      CHECK(slots[i].rank == c.slots[i].rank);
      CHECK(slots[i].role == c.slots[i].role);
      CHECK(slots[i].role_rank == c.slots[i].role_rank);
      CHECK(slots[i].role_world_size == c.slots[i].role_world_size);
      CHECK(slots[i].port == c.slots[i].port);
    }
  }
}

TEST_CASE("LocalSlots follows the order roles are listed in", "[envmap][layout]") {
  JobLayout layout = TfJob(0);
  layout.roles = {{"worker", 2, {}}, {"ps", 2, {}}, {"chief", 1, {}}};
  std::vector<WorkerSlot> here = LocalSlots(layout);
  REQUIRE(here.size() == 2);
  CHECK(here[0].role == "worker");
  CHECK(here[0].role_rank == 0);
  CHECK(here[1].role == "worker");
  CHECK(here[1].role_rank == 1);
  layout.node_rank = 1;
  std::vector<WorkerSlot> there = LocalSlots(layout);
  REQUIRE(there.size() == 3);
  CHECK(there[0].role == "ps");
  CHECK(there[0].role_rank == 0);
  CHECK(there[0].role_world_size == 2);
  CHECK(there[1].role == "ps");
  CHECK(there[1].role_rank == 1);
  CHECK(there[2].role == "chief");
  CHECK(there[2].role_rank == 0);
  CHECK(there[2].role_world_size == 1);
}

TEST_CASE("Validate accepts well-formed layouts", "[envmap][layout]") {
  for (int node_rank = 0; node_rank < 3; ++node_rank) CHECK(Validate(ThreeNodes(node_rank)).ok());
  CHECK(Validate(TfJob(1)).ok());
  JobLayout workers_only = TfJob(0);
  workers_only.roles = {{"worker", 5, {}}};
  CHECK(Validate(workers_only).ok());
  JobLayout with_evaluator = TfJob(0);
  with_evaluator.roles = {{"chief", 1, {}}, {"worker", 2, {}}, {"ps", 1, {}}, {"evaluator", 1, {}}};
  CHECK(Validate(with_evaluator).ok());
}

TEST_CASE("Validate names the first problem", "[envmap][layout]") {
  using Mutate = void (*)(JobLayout&);
  static const struct {
    const char* what;
    Mutate mutate;
    const char* message;
  } kCases[] = {
      {"no nodes", [](JobLayout& l) { l.nodes.clear(); }, "layout: the job has no nodes"},
      {"node rank past the end", [](JobLayout& l) { l.node_rank = 2; },
       "--node-rank: 2 is out of range (the job has 2 nodes)"},
      {"negative node rank", [](JobLayout& l) { l.node_rank = -1; },
       "--node-rank: -1 is out of range (the job has 2 nodes)"},
      {"node rank with one node",
       [](JobLayout& l) {
         l.nodes.pop_back();
         l.roles = {};
         l.node_rank = 1;
       },
       "--node-rank: 1 is out of range (the job has 1 node)"},
      {"nproc zero", [](JobLayout& l) { l.nodes[1].nproc = 0; }, "node 1 (b): 0 worker processes (need at least 1)"},
      {"nproc negative", [](JobLayout& l) { l.nodes[0].nproc = -2; },
       "node 0 (a): -2 worker processes (need at least 1)"},
      {"too few task ports",
       [](JobLayout& l) {
         l.nodes[1].task_ports = {3000, 3001};
       },
       "node 1 (b): 2 task ports for 3 worker processes"},
      {"too many task ports",
       [](JobLayout& l) {
         l.nodes[0].task_ports = {1, 2, 3};
       },
       "node 0 (a): 3 task ports for 2 worker processes"},
      {"unknown role", [](JobLayout& l) { l.roles[1].name = "master"; },
       "--roles: unknown role 'master' (expected chief, worker, ps or evaluator)"},
      {"role names are case sensitive", [](JobLayout& l) { l.roles[0].name = "Chief"; },
       "--roles: unknown role 'Chief' (expected chief, worker, ps or evaluator)"},
      {"zero count", [](JobLayout& l) { l.roles[2].count = 0; }, "--roles: 'ps' has count 0 (need at least 1)"},
      {"role listed twice",
       [](JobLayout& l) {
         l.roles = {{"chief", 1, {}}, {"worker", 2, {}}, {"worker", 2, {}}};
       },
       "--roles: 'worker' is listed twice"},
      {"two chiefs",
       [](JobLayout& l) {
         l.roles = {{"chief", 2, {}}, {"worker", 3, {}}};
       },
       "--roles: at most one chief, got 2"},
      {"two evaluators",
       [](JobLayout& l) {
         l.roles = {{"worker", 3, {}}, {"evaluator", 2, {}}};
       },
       "--roles: at most one evaluator, got 2"},
      {"counts short", [](JobLayout& l) { l.roles[1].count = 1; },
       "--roles: counts add up to 3 but the job has 5 processes"},
      {"counts over", [](JobLayout& l) { l.roles[1].count = 4; },
       "--roles: counts add up to 6 but the job has 5 processes"},
      {"ps without worker",
       [](JobLayout& l) {
         l.roles = {{"chief", 1, {}}, {"ps", 4, {}}};
       },
       "--roles: a ps role needs at least one worker"},
      {"no task ports on one node", [](JobLayout& l) { l.nodes[1].task_ports.clear(); },
       "--roles: every task needs its own port (node 1 has none)"},
      {"no task ports anywhere",
       [](JobLayout& l) {
         l.nodes[0].task_ports.clear();
         l.nodes[1].task_ports.clear();
       },
       "--roles: every task needs its own port (node 0 has none)"},
  };
  for (const auto& c : kCases) {
    INFO(c.what);
    JobLayout layout = TfJob(0);
    c.mutate(layout);
    Status s = Validate(layout);
    CHECK_FALSE(s.ok());
    CHECK(s.code() == Code::kInvalidArgument);
    CHECK(s.message() == c.message);
  }
}

TEST_CASE("Validate ignores task ports and role rules when there are no roles", "[envmap][layout]") {
  JobLayout layout = ThreeNodes(0);
  layout.role = "anything-goes";
  CHECK(Validate(layout).ok());
  layout.nodes[2].task_ports = {4000};
  CHECK(Validate(layout).ok());
}

TEST_CASE("a partial table keeps RANK and WORLD_SIZE right from this node's row alone", "[envmap][layout]") {
  // Node 1 of 4, 3 workers from rank 2, 9 workers in all.
  Result<std::vector<Node>> t = PartialTable(4, 1, Node{"b", "10.0.0.2", 3, {}}, 2, 9);
  REQUIRE(t.ok());
  JobLayout layout;
  layout.nodes = *t;
  layout.node_rank = 1;
  CHECK(layout.nodes.size() == 4);
  CHECK(layout.nodes[1].host == "b");
  CHECK(WorldSize(layout) == 9);
  CHECK(RankOffset(layout, 1) == 2);
  CHECK(LocalSlots(layout).front().rank == 2);
  CHECK(Validate(layout).ok());
  // First and last node, and a single-node job.
  CHECK(PartialTable(3, 0, Node{"a", "a", 2, {}}, 0, 4).ok());
  CHECK(PartialTable(3, 2, Node{"c", "c", 2, {}}, 2, 4).ok());
  CHECK(PartialTable(1, 0, Node{"a", "a", 2, {}}, 0, 2).ok());
  // Numbers no job can have: each other node needs a worker.
  for (auto [nnodes, rank, offset, world] : {std::array{3, 1, 0, 9}, std::array{3, 1, 1, 3}, std::array{2, 0, 1, 5},
                                             std::array{2, 2, 1, 5}, std::array{1, 0, 0, 3}}) {
    INFO(nnodes << " " << rank << " " << offset << " " << world);
    CHECK_FALSE(PartialTable(nnodes, rank, Node{"x", "x", 2, {}}, offset, world).ok());
  }
  CHECK(PartialTable(3, 1, Node{"b", "b", 2, {}}, 0, 9).status().message() ==
        "assignment: node 1 of 3 with 2 workers from rank 0 cannot be part of 9 workers");
}

}  // namespace
}  // namespace dlaunch::envmap
