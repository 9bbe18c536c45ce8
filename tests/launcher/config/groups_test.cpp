// The groups in a plan: what each mode accepts (WithPrograms) and how a run's
// ranks are numbered once its layout is known (TableFor).
#include "launcher/config/groups.hpp"

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "launcher/config/colon_groups.hpp"
#include "launcher/config/programs_codec.hpp"
#include "tests/temp_dir.hpp"

namespace dlaunch::launcher {
namespace {

const MachineFacts kGroupFacts{"here", 4, {}, "fresh"};

// `dlaunch ARGS` decided with its groups, as main does.
Result<Plan> GroupsPlan(const std::vector<std::string>& args) {
  Result<JobLine> line = ParseJobLine(args, {});
  if (!line.ok()) return line.status();
  Result<Plan> plan = Decide(line->options, envmap::Detected{}, kGroupFacts, {});
  if (!plan.ok()) return plan;
  return WithPrograms(std::move(*plan), line->programs);
}

envmap::JobLayout Nodes(std::vector<int> nproc, int node_rank) {
  envmap::JobLayout layout;
  for (int n : nproc) layout.nodes.push_back(envmap::Node{"h", "h", n, {}});
  layout.node_rank = node_rank;
  return layout;
}

envmap::ProgramPlan Colon(std::vector<int> per_node) {
  envmap::ProgramPlan p;
  for (size_t g = 0; g < per_node.size(); ++g) {
    envmap::ProgramGroup group;
    group.role = "r" + std::to_string(g);
    group.argv = {"x"};
    group.line = "group " + std::to_string(g + 1);
    p.groups.push_back(group);
  }
  p.per_node = std::move(per_node);
  return p;
}

TEST_CASE("TableFor: each node runs the groups' counts in turn", "[groups]") {
  Result<envmap::ProgramTable> one = TableFor(Colon({1, 3}), Nodes({4}, 0));
  REQUIRE(one.ok());
  CHECK(one->group_of == std::vector<int>{0, 1, 1, 1});
  // A node agent may know only its own row (the others are placeholders).
  Result<envmap::ProgramTable> two = TableFor(Colon({1, 2}), Nodes({5, 1}, 1));
  REQUIRE_FALSE(two.ok());
  CHECK(two.status().message() ==
        "the groups make 3 workers a node, but node 1 runs 1 of 6 in all; every node runs each group's count");
  Result<envmap::ProgramTable> both = TableFor(Colon({1, 2}), Nodes({3, 3}, 1));
  REQUIRE(both.ok());
  CHECK(both->group_of == std::vector<int>{0, 1, 1, 0, 1, 1});
}

TEST_CASE("TableFor: a head's counts per node, and --role-restarts by role", "[groups]") {
  envmap::ProgramPlan p = Colon({2, 1});
  p.node_counts = {{2, 0}, {0, 1}};
  p.restarts = {{"r1", 4}};
  Result<envmap::ProgramTable> t = TableFor(p, Nodes({2, 1}, 1));
  REQUIRE(t.ok());
  CHECK(t->group_of == std::vector<int>{0, 0, 1});
  CHECK(t->groups[1].restarts == 4);
  CHECK(t->groups[0].restarts == -1);
  CHECK(TableFor(p, Nodes({2, 2}, 1)).status().message() == "node 1 runs 2 workers, but its groups make 1");
  CHECK(TableFor(p, Nodes({3}, 0)).status().message() == "the groups name 2 nodes, but the job has 1");
  // Another node's row that disagrees, however large, is refused before any table is made.
  envmap::ProgramPlan huge = p;
  huge.restarts.clear();
  huge.node_counts = {{2, 0}, {1 << 20, 1 << 20}};
  for (int g = 2; g < 1024; ++g) {
    huge.groups.push_back(huge.groups[0]);
    huge.groups.back().role = fmt::format("r{}", g);
    huge.node_counts[0].push_back(0);
    huge.node_counts[1].push_back(1 << 20);
  }
  CHECK(TableFor(huge, Nodes({2, 1}, 0)).status().message() ==
        "the groups have 1073741826 worker processes in all but the job has 3");
  p.restarts = {{"nobody", 1}};
  CHECK(TableFor(p, Nodes({2, 1}, 0)).status().message() ==
        "--role-restarts: no group has role 'nobody' (the roles are r0, r1)");
}

TEST_CASE("TableFor: a --multi-prog file over the world size", "[groups]") {
  envmap::ProgramPlan p;
  p.multi_prog_file = "mp.conf";
  p.multi_prog_text = "0,2 a %t\n* b\n";
  Result<envmap::ProgramTable> t = TableFor(p, Nodes({2, 2}, 0));
  REQUIRE(t.ok());
  CHECK(t->group_of == std::vector<int>{0, 1, 0, 1});
  CHECK(envmap::ArgvOf(*t, 2) == std::vector<std::string>{"a", "2"});
  p.multi_prog_text = "0-1 a\n";
  CHECK(TableFor(p, Nodes({3}, 0)).status().message() ==
        "multi-prog mp.conf: rank 2 has no line; add it or a '*' line");
}

TEST_CASE("WithPrograms: what each mode accepts, in one line each", "[groups]") {
  REQUIRE(GroupsPlan({"-np", "1", "--", "a", ":", "-np", "2", "--", "b"}).ok());
  static const struct {
    const char* what;
    std::vector<std::string> args;
    const char* message;
  } kCases[] = {
      {"per-node launchers",
       {"--launch-mode", "per-node", "--", "a", ":", "--", "b"},
       "--launch-mode per-node: not with several groups (each worker runs its own program)"},
      {"--roles",
       {"--roles", "chief:1,worker:1", "-np", "1", "--", "a", ":", "--", "b"},
       "--roles: not with several groups; give each group its --role"},
      {"a role restarted alone across nodes",
       {"--role-restarts", "b=1", "--nnodes", "2", "--master-addr", "h", "--node-rank", "0", "--role", "a", "--", "a",
        ":", "--role", "b", "--", "b"},
       "--role-restarts: a role restarted alone runs on one node (its workers' new world cannot span nodes yet)"},
      {"tf with two chiefs",
       {"--env", "tf", "-np", "2", "--role", "chief", "--", "a", ":", "--role", "ps", "--", "b"},
       "--env tf: the groups' roles: at most one chief, got 2"},
      {"tf with a role restarted alone",
       {"--env", "tf", "--role-restarts", "ps=1", "--role", "chief", "--", "a", ":", "--role", "ps", "--", "b"},
       "--env tf: not with --role-restarts (TF_CONFIG names every task of one cluster)"},
      {"tf across a rendezvous",
       {"--env", "tf", "--rdzv-endpoint", "h:1", "--nnodes", "2", "--role", "chief", "--", "a", ":", "--role", "worker",
        "--", "b"},
       "--env tf: across nodes that meet at a rendezvous, each group's tasks need hosts of their own (start the job "
       "from a head with -H per group)"},
  };
  for (const auto& c : kCases) {
    INFO(c.what);
    Result<Plan> plan = GroupsPlan(c.args);
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.status().message() == c.message);
  }
  // More groups than an agent takes: the head refuses, before it starts any agent.
  std::vector<std::string> many = {"-H", "n1", "--role", "g0", "--", "true"};
  for (int g = 1; g <= 1024; ++g) many.insert(many.end(), {":", "--role", fmt::format("g{}", g), "--", "true"});
  Result<Plan> head = GroupsPlan(many);
  REQUIRE_FALSE(head.ok());
  CHECK(head.status().message() ==
        "several groups: the agents could not take them: DLAUNCH_PROGRAMS: the groups: 'groups' is not a list of 1 to "
        "1024 groups");
}

TEST_CASE("WithPrograms: from a head, each agent reads the --multi-prog file itself", "[groups]") {
  testing::TempDir dir("groups");
  std::ofstream(dir / "mp.conf") << "0 a\n* b\n";
  Result<Plan> plan = GroupsPlan({"-H", "n1:2,n2:2", "--multi-prog", dir / "mp.conf"});
  REQUIRE(plan.ok());
  const HeadPlan& head = std::get<HeadPlan>(plan->run);
  CHECK(head.programs.empty());  // nothing over stdin: the path goes to each agent as typed, as srun's does
  CHECK(std::find(head.agent_flags.begin(), head.agent_flags.end(), "--multi-prog") != head.agent_flags.end());
  CHECK(head.workers == std::vector<std::string>{"2", "2"});
}

TEST_CASE("WithPrograms: --env tf makes the groups TensorFlow's tasks", "[groups]") {
  Result<Plan> plan = GroupsPlan(
      {"--env", "tf", "-np", "1", "--role", "chief", "--", "a", ":", "-np", "2", "--role", "worker", "--", "b"});
  REQUIRE(plan.ok());
  const WorkerPlan& w = *plan->workers();
  REQUIRE(w.roles.size() == 2);
  CHECK(w.roles[0].name == "chief");
  CHECK(w.roles[0].count == 1);
  CHECK(w.roles[1].name == "worker");
  CHECK(w.roles[1].count == 2);
  CHECK(w.programs.tf);
  CHECK(w.argv == std::vector<std::string>{"a"});
  // From a head, the agents get the groups, TF_CONFIG on.
  Result<Plan> head = GroupsPlan(
      {"--env", "tf", "-H", "n1", "--role", "chief", "--", "a", ":", "-H", "n2:2", "--role", "worker", "--", "b"});
  REQUIRE(head.ok());
  Result<envmap::ProgramPlan> sent = DecodePrograms(std::get<HeadPlan>(head->run).programs);
  REQUIRE(sent.ok());
  CHECK(sent->tf);
  CHECK(sent->node_counts == std::vector<std::vector<int>>{{1, 0}, {0, 2}});
}

}  // namespace
}  // namespace dlaunch::launcher
