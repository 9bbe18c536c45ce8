#include "envmap/programs.hpp"

#include <catch2/catch.hpp>

#include "tests/envmap/fixtures.hpp"

namespace dlaunch::envmap {
namespace {

ProgramGroup MakeGroup(std::string role, std::vector<std::string> argv) {
  ProgramGroup g;
  g.role = std::move(role);
  g.argv = std::move(argv);
  return g;
}

// mpirun -np 1 trainer : -np 3 rollout, on one node of 4.
ProgramTable TrainerAndRollout() {
  ProgramTable t;
  t.groups = {MakeGroup("trainer", {"python3", "train.py"}), MakeGroup("rollout", {"python3", "serve.py"})};
  t.group_of = ConsecutiveRanks({1, 3});
  return t;
}

JobLayout SoloNode(int nproc) {
  JobLayout layout;
  layout.nodes = {{"solo", "127.0.0.1", nproc, {}}};
  layout.master_addr = "127.0.0.1";
  layout.master_port = 29500;
  return layout;
}

std::string EnvOf(const EnvVars& env, const std::string& name) {
  const std::string* v = Find(env, name);
  return v ? *v : "<unset>";
}

TEST_CASE("ConsecutiveRanks numbers groups one after another, as mpirun", "[envmap][programs]") {
  CHECK(ConsecutiveRanks({1, 3}) == std::vector<int>{0, 1, 1, 1});
  CHECK(ConsecutiveRanks({2, 1, 2}) == std::vector<int>{0, 0, 1, 2, 2});
  CHECK(ConsecutiveRanks({}).empty());
}

TEST_CASE("RoleOf counts a rank's place among its group's ranks", "[envmap][programs]") {
  ProgramTable t;
  t.groups = {MakeGroup("a", {"a"}), MakeGroup("b", {"b"})};
  t.group_of = {0, 1, 0, 1, 1};  // a multi-prog file: "0,2 a" and "1,3-4 b"
  static const struct {
    int rank, group, role_rank, role_size;
  } kCases[] = {{0, 0, 0, 2}, {1, 1, 0, 3}, {2, 0, 1, 2}, {3, 1, 1, 3}, {4, 1, 2, 3}};
  for (const auto& c : kCases) {
    INFO("rank " << c.rank);
    RankRole r = RoleOf(t, c.rank);
    CHECK(r.group == c.group);
    CHECK(r.role_rank == c.role_rank);
    CHECK(r.role_world_size == c.role_size);
  }
}

TEST_CASE("ArgvOf expands %t, %o and %% only where the group asks", "[envmap][programs]") {
  ProgramTable t;
  t.groups = {MakeGroup("line1", {"echo", "task%t", "off=%o", "100%%", "%x", "%"}), MakeGroup("g", {"echo", "%t"})};
  t.groups[0].expand = true;
  t.group_of = {1, 0, 0};
  CHECK(ArgvOf(t, 2) == std::vector<std::string>{"echo", "task2", "off=1", "100%", "%x", "%"});
  CHECK(ArgvOf(t, 1) == std::vector<std::string>{"echo", "task1", "off=0", "100%", "%x", "%"});
  CHECK(ArgvOf(t, 0) == std::vector<std::string>{"echo", "%t"});
}

TEST_CASE("ValidatePrograms names the group that is wrong", "[envmap][programs]") {
  CHECK(ValidatePrograms(TrainerAndRollout(), 4).ok());
  static const struct {
    const char* what;
    void (*change)(ProgramTable&);
    int world;
    const char* message;
  } kCases[] = {
      {"short", [](ProgramTable&) {}, 5, "the groups have 4 worker processes in all but the job has 5"},
      {"no command", [](ProgramTable& t) { t.groups[1].argv.clear(); }, 4, "group 2 (rollout): no command"},
      {"role twice", [](ProgramTable& t) { t.groups[1].role = "trainer"; }, 4,
       "group 2 (trainer): role 'trainer' is named by another group too (give each group its own --role)"},
      {"empty group",
       [](ProgramTable& t) {
         t.groups.push_back(MakeGroup("idle", {"x"}));
         t.groups[2].line = "group 3";
       },
       4, "group 3 (idle): runs no worker"},
      {"rank without group", [](ProgramTable& t) { t.group_of[3] = 7; }, 4, "rank 3 has no group"},
      {"own world with a hole",
       [](ProgramTable& t) {
         t.group_of = {1, 0, 1, 1};
         t.groups[1].restarts = 2;
       },
       4, "group 2 (rollout): a role restarted on its own needs consecutive ranks"},
      {"file line", [](ProgramTable& t) { t.groups[0].line = "mp.conf:3", t.groups[0].argv = {""}; }, 4,
       "mp.conf:3 (trainer): no command"},
  };
  for (const auto& c : kCases) {
    INFO(c.what);
    ProgramTable t = TrainerAndRollout();
    c.change(t);
    Status s = ValidatePrograms(t, c.world);
    CHECK_FALSE(s.ok());
    CHECK(s.message() == c.message);
  }
}

TEST_CASE("ProgramEnv: one world, roles from the groups", "[envmap][programs]") {
  ProgramTable t = TrainerAndRollout();
  t.groups[1].env = {{"MODE", "serve"}, {"OMP_NUM_THREADS", "4"}};
  t.groups[1].ompi = true;
  JobLayout layout = SoloNode(4);
  std::vector<WorkerSlot> slots = LocalSlots(layout);
  EnvVars trainer = ProgramEnv(layout, slots[0], t, {}, {});
  CHECK(EnvOf(trainer, "RANK") == "0");
  CHECK(EnvOf(trainer, "WORLD_SIZE") == "4");
  CHECK(EnvOf(trainer, "ROLE_NAME") == "trainer");
  CHECK(EnvOf(trainer, "ROLE_RANK") == "0");
  CHECK(EnvOf(trainer, "ROLE_WORLD_SIZE") == "1");
  CHECK(EnvOf(trainer, "MODE") == "<unset>");
  CHECK(EnvOf(trainer, "OMPI_COMM_WORLD_RANK") == "<unset>");
  EnvVars rollout = ProgramEnv(layout, slots[3], t, {}, {});
  CHECK(EnvOf(rollout, "RANK") == "3");
  CHECK(EnvOf(rollout, "LOCAL_RANK") == "3");
  CHECK(EnvOf(rollout, "LOCAL_WORLD_SIZE") == "4");
  CHECK(EnvOf(rollout, "ROLE_NAME") == "rollout");
  CHECK(EnvOf(rollout, "ROLE_RANK") == "2");
  CHECK(EnvOf(rollout, "ROLE_WORLD_SIZE") == "3");
  CHECK(EnvOf(rollout, "MASTER_PORT") == "29500");
  CHECK(EnvOf(rollout, "MODE") == "serve");
  CHECK(EnvOf(rollout, "OMP_NUM_THREADS") == "4");  // the group's own value wins
  CHECK(EnvOf(rollout, "OMPI_COMM_WORLD_RANK") == "3");
  CHECK(EnvOf(rollout, "OMPI_COMM_WORLD_SIZE") == "4");
}

TEST_CASE("ProgramEnv: a role restarted alone is a world of its own", "[envmap][programs]") {
  ProgramTable t;
  t.groups = {MakeGroup("rollout", {"serve"}), MakeGroup("trainer", {"train"}), MakeGroup("critic", {"critic"})};
  t.group_of = ConsecutiveRanks({2, 3, 1});
  t.groups[0].restarts = 2;
  t.groups[0].world_port = 31000;
  JobLayout layout = SoloNode(6);
  layout.max_restarts = 0;
  std::vector<WorkerSlot> slots = LocalSlots(layout);
  static const struct {
    int local;
    const char *rank, *world, *port, *role, *role_rank, *role_size, *max_restarts;
  } kCases[] = {
      {0, "0", "2", "31000", "rollout", "0", "2", "2"},
      {1, "1", "2", "31000", "rollout", "1", "2", "2"},
      // The groups that are not restarted alone share the job's world, renumbered.
      {2, "0", "4", "29500", "trainer", "0", "3", "0"},
      {4, "2", "4", "29500", "trainer", "2", "3", "0"},
      {5, "3", "4", "29500", "critic", "0", "1", "0"},
  };
  for (const auto& c : kCases) {
    INFO("local rank " << c.local);
    EnvVars env = ProgramEnv(layout, slots[static_cast<size_t>(c.local)], t, {}, {});
    CHECK(EnvOf(env, "RANK") == c.rank);
    CHECK(EnvOf(env, "WORLD_SIZE") == c.world);
    CHECK(EnvOf(env, "MASTER_PORT") == c.port);
    CHECK(EnvOf(env, "ROLE_NAME") == c.role);
    CHECK(EnvOf(env, "ROLE_RANK") == c.role_rank);
    CHECK(EnvOf(env, "ROLE_WORLD_SIZE") == c.role_size);
    CHECK(EnvOf(env, "TORCHELASTIC_MAX_RESTARTS") == c.max_restarts);
    // The machine's count over every group, whatever the world.
    CHECK(EnvOf(env, "LOCAL_RANK") == std::to_string(c.local));
    CHECK(EnvOf(env, "LOCAL_WORLD_SIZE") == "6");
  }
}

TEST_CASE("ProgramEnv across nodes keeps the job's numbering", "[envmap][programs]") {
  // trainer on nodes a and b (ranks 0-4), rollout on c (rank 5).
  ProgramTable t;
  t.groups = {MakeGroup("trainer", {"train"}), MakeGroup("rollout", {"serve"})};
  t.group_of = ConsecutiveRanks({5, 1});
  JobLayout layout = testing::ThreeNodes(2);
  EnvVars env = ProgramEnv(layout, LocalSlots(layout)[0], t, {}, {});
  CHECK(EnvOf(env, "RANK") == "5");
  CHECK(EnvOf(env, "LOCAL_RANK") == "0");
  CHECK(EnvOf(env, "GROUP_RANK") == "2");
  CHECK(EnvOf(env, "ROLE_NAME") == "rollout");
  CHECK(EnvOf(env, "ROLE_RANK") == "0");
  CHECK(EnvOf(env, "WORLD_SIZE") == "6");
}

TEST_CASE("IndexRanks answers what counting over the world answers", "[envmap][programs]") {
  // Groups interleaved (a multi-prog file's "0,2 a"), one restarted alone.
  ProgramTable t;
  t.groups = {MakeGroup("a", {"a"}), MakeGroup("b", {"b"}), MakeGroup("c", {"c"})};
  t.group_of = {0, 1, 0, 1, 2, 2, 1};
  t.groups[2].restarts = 1;
  JobLayout layout = SoloNode(7);
  std::vector<WorkerSlot> slots = LocalSlots(layout);
  ProgramTable indexed = t;
  indexed.index = IndexRanks(indexed);
  CHECK(indexed.index.role_rank == std::vector<int>{0, 0, 1, 1, 0, 1, 2});
  CHECK(indexed.index.world_rank == std::vector<int>{0, 1, 2, 3, 0, 1, 4});
  CHECK(indexed.index.group_size == std::vector<int>{2, 3, 2});
  CHECK(indexed.index.shared_world == 5);
  for (const WorkerSlot& slot : slots) {
    INFO("rank " << slot.rank);
    RankRole a = RoleOf(t, slot.rank), b = RoleOf(indexed, slot.rank);
    CHECK(a.role_rank == b.role_rank);
    CHECK(a.role_world_size == b.role_world_size);
    CHECK(ProgramEnv(layout, slot, t, {}, {}) == ProgramEnv(layout, slot, indexed, {}, {}));
  }
  CHECK(PlacesOnNode(slots, t) == std::vector<int>{0, 0, 1, 1, 0, 1, 2});
}

// A node of 8,192 workers in two groups: every worker's slot, argv, GPU place
// and environment. Indexed, the node costs O(workers); counting over the world
// for each worker cost O(workers * world), seconds for a large node.
TEST_CASE("a node of 8192 workers in groups is set up in one pass over the world", "[envmap][programs]") {
  constexpr int kWorkers = 8192;
  ProgramTable t;
  t.groups = {MakeGroup("trainer", {"train", "%t"}), MakeGroup("rollout", {"serve", "%o"})};
  t.groups[0].expand = t.groups[1].expand = true;
  t.group_of = ConsecutiveRanks({kWorkers / 2, kWorkers / 2});
  t.index = IndexRanks(t);
  JobLayout layout = SoloNode(kWorkers);
  std::vector<WorkerSlot> slots = ProgramSlots(layout, t);
  std::vector<int> places = PlacesOnNode(slots, t);
  size_t bytes = 0;
  for (const WorkerSlot& slot : slots) {
    for (const std::string& arg : ArgvOf(t, slot.rank)) bytes += arg.size();
    bytes += ProgramEnv(layout, slot, t, {}, {}).size();
  }
  CHECK(bytes > 0);
  CHECK(places.back() == kWorkers / 2 - 1);
  CHECK(slots.back().role_rank == kWorkers / 2 - 1);
  CHECK(ArgvOf(t, kWorkers - 1) == std::vector<std::string>{"serve", std::to_string(kWorkers / 2 - 1)});
}

}  // namespace
}  // namespace dlaunch::envmap
