// mpirun's colon syntax: where a ':' separates groups, what each group may say,
// and the one line each mistake gets, naming the group.
#include "launcher/config/colon_groups.hpp"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace dlaunch::launcher {
namespace {

using Args = std::vector<std::string>;

TEST_CASE("a ':' separates groups only before a group flag or '--'", "[colon_groups]") {
  static const struct {
    const char* what;
    Args args;
    std::vector<Args> groups;
  } kCases[] = {
      {"no colon", {"-np", "2", "--", "a"}, {{"-np", "2", "--", "a"}}},
      {"two groups",
       {"-np", "1", "--", "a", ":", "-np", "3", "--", "b"},
       {{"-np", "1", "--", "a"}, {"-np", "3", "--", "b"}}},
      {"'--' opens a group", {"--", "a", ":", "--", "b"}, {{"--", "a"}, {"--", "b"}}},
      {"every spelling of a group flag",
       {"--",     "a",  ":",  "--nproc_per_node=2",
        "b",      ":",  "-x", "A=1",
        "--",     "c",  ":",  "-H",
        "h",      "--", "d",  ":",
        "--gpus", "0",  "--", "e"},
       {{"--", "a"},
        {"--nproc_per_node=2", "b"},
        {"-x", "A=1", "--", "c"},
        {"-H", "h", "--", "d"},
        {"--gpus", "0", "--", "e"}}},
      {"a worker's own ':' at the end", {"--", "sh", "-c", "x", ":"}, {{"--", "sh", "-c", "x", ":"}}},
      {"a worker's ':' before its own argument",
       {"--", "sh", "-c", "x", ":", "y"},
       {{"--", "sh", "-c", "x", ":", "y"}}},
      {"a worker's ':' before a job flag stays the worker's",
       {"--", "a", ":", "--max-restarts", "3"},
       {{"--", "a", ":", "--max-restarts", "3"}}},
      {"'\\:' passes a literal ':'", {"--", "a", "\\:", "--", "b"}, {{"--", "a", ":", "--", "b"}}},
      {"'\\\\:' passes '\\:'", {"--", "a", "\\\\:"}, {{"--", "a", "\\:"}}},
      {"other backslashes stay", {"--", "a", "\\x:", "a\\:"}, {{"--", "a", "\\x:", "a\\:"}}},
      {"a leading ':' leaves the first group empty", {":", "--", "b"}, {{}, {"--", "b"}}},
  };
  for (const auto& c : kCases) {
    INFO(c.what);
    CHECK(SplitGroups(c.args) == c.groups);
  }
}

TEST_CASE("ParseJobLine sizes the node to every group and keeps each group's own", "[colon_groups]") {
  envmap::EnvMap env = {{"FROM_HERE", "yes"}};
  Result<JobLine> line = ParseJobLine({"--max-restarts",
                                       "2",
                                       "-np",
                                       "1",
                                       "--role",
                                       "trainer",
                                       "-x",
                                       "LR=0.1",
                                       "--",
                                       "python3",
                                       "train.py",
                                       ":",
                                       "--nproc-per-node",
                                       "3",
                                       "--role",
                                       "rollout",
                                       "--env",
                                       "ompi",
                                       "-x",
                                       "FROM_HERE",
                                       "--gpus",
                                       "4,5",
                                       "--",
                                       "serve",
                                       "--port",
                                       "1"},
                                      env);
  REQUIRE(line.ok());
  CHECK(line->options.nproc == 4);
  CHECK(line->options.max_restarts == 2);
  const envmap::ProgramPlan& p = line->programs;
  REQUIRE(p.groups.size() == 2);
  CHECK(p.per_node == std::vector<int>{1, 3});
  CHECK(p.groups[0].role == "trainer");
  CHECK(p.groups[0].argv == Args{"python3", "train.py"});
  CHECK(p.groups[0].env == envmap::EnvVars{{"LR", "0.1"}});
  CHECK_FALSE(p.groups[0].ompi);
  CHECK(p.groups[1].role == "rollout");
  CHECK(p.groups[1].argv == Args{"serve", "--port", "1"});
  CHECK(p.groups[1].env == envmap::EnvVars{{"FROM_HERE", "yes"}});
  CHECK(p.groups[1].ompi);
  CHECK(p.groups[1].gpus == Args{"4", "5"});
  CHECK(p.groups[1].line == "group 2");
}

TEST_CASE("a group without --role is named by its place", "[colon_groups]") {
  Result<JobLine> line = ParseJobLine({"--", "a", ":", "-np", "2", "--", "b"}, {});
  REQUIRE(line.ok());
  CHECK(line->programs.groups[0].role == "group1");
  CHECK(line->programs.groups[1].role == "group2");
  CHECK(line->options.nproc == 3);
}

TEST_CASE("one group parses as before, with --multi-prog and --role-restarts read", "[colon_groups]") {
  Result<JobLine> plain = ParseJobLine({"--nproc-per-node", "2", "train.py"}, {});
  REQUIRE(plain.ok());
  CHECK(plain->programs.empty());
  CHECK(plain->options.command == Args{"train.py"});
}

TEST_CASE("each mistake in the groups gets one line naming the group", "[colon_groups]") {
  static const struct {
    const char* what;
    Args args;
    const char* message;
  } kCases[] = {
      {"no command after ':'", {"-np", "1", "--", "a", ":", "-np", "2"}, "group 2: no command after ':'"},
      {"an empty command after ':'", {"-np", "1", "--", "a", ":", "--"}, "group 2: no command after ':'"},
      {"an empty group",
       {"-np", "1", "--", "a", ":", "-np", "0", "--", "b"},
       "group 2: --np: expected a positive number of processes, got '0'"},
      {"a role named twice",
       {"--role", "a", "--", "x", ":", "--role", "a", "--", "y"},
       "group 2 (a): role 'a' is named by group 1 too (give each group its own --role)"},
      {"a job flag in a later group",
       {"--", "x", ":", "--role", "r", "--max-restarts", "3", "--", "y"},
       "group 2 (r): --max-restarts applies to the whole job; give it before the first ':'"},
      {"hosts of a later group",
       {"--", "x", ":", "-H", "h1", "--", "y"},
       "group 2 (group2): hosts of its own (-H, --hostfile) need a head launch with a node list before the first ':'"},
      {"horovod in a later group",
       {"--", "x", ":", "--env", "horovod", "--", "y"},
       "group 2 (group2): --env horovod serves one store for the whole job; give it before the first ':'"},
      {"tf in a later group",
       {"--", "x", ":", "--env", "tf", "--", "y"},
       "group 2 (group2): --env tf describes the whole job's tasks; give it before the first ':'"},
      {"tf for one command",
       {"--env", "tf", "--", "x"},
       "--env tf: TF_CONFIG describes several groups (--role chief, worker, ps, evaluator between ':'s); with one "
       "command give --roles"},
      {"a count that is not a number",
       {"--", "x", ":", "--nproc-per-node", "gpu", "--", "y"},
       "group 2 (group2): give its count as a number (--nproc-per-node N or -np N)"},
      {"-x of a variable not set here",
       {"--", "x", ":", "-x", "NOT_SET_ANYWHERE", "--", "y"},
       "group 2 (group2): -x NOT_SET_ANYWHERE: not set here, so there is no value to pass"},
      {"a bad --gpus",
       {"--", "x", ":", "--gpus", "0,,1", "--", "y"},
       "group 2: --gpus: expected GPU ids like 0,1 or GPU-UUID,... (at most 1024), got '0,,1'"},
      {"an unknown flag in a group",
       {"--", "x", ":", "--role", "r", "--nosuch", "--", "y"},
       "group 2: unknown flag '--nosuch'"},
      {"--multi-prog beside groups",
       {"--multi-prog", "/etc/hostname", "--", "x", ":", "--", "y"},
       "--multi-prog: the file names each rank's command; got 'x' as well"},
      {"a leading ':'", {":", "--", "y"}, "group 1: is empty (nothing between the ':'s)"},
      {"--role-restarts of one group",
       {"--role-restarts", "a=1", "--", "x"},
       "--role-restarts: the job runs one group; give several (':' between them) or --multi-prog"},
      {"--role-restarts malformed",
       {"--role-restarts", "a", "--", "x", ":", "--", "y"},
       "--role-restarts: expected ROLE=N, got 'a'"},
      {"--role-restarts twice",
       {"--role-restarts", "a=1", "--role-restarts", "a=2", "--", "x", ":", "--", "y"},
       "--role-restarts: role 'a' is given twice ('a=1', 'a=2')"},
      // Each group's count fits the job on its own; their sum on every node does not.
      {"groups whose sum over the nodes passes 2^31",
       {"--nnodes", "40000", "--node-rank", "0", "--master-addr", "127.0.0.1", "-np", "1", "--", "a", ":", "-np",
        "65535", "--", "b"},
       "the groups make 65536 workers a node, and 40000 nodes of them 2621440000, over the limit of 2147483647 in a "
       "job"},
  };
  for (const auto& c : kCases) {
    INFO(c.what);
    Result<JobLine> line = ParseJobLine(c.args, {});
    REQUIRE_FALSE(line.ok());
    CHECK(line.status().message() == c.message);
  }
}

TEST_CASE("--multi-prog reads its file once, bounded, and takes no command", "[colon_groups]") {
  Result<JobLine> dir = ParseJobLine({"-np", "2", "--multi-prog", "/"}, {});
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.status().message() == "multi-prog /: a directory, not a regular file");
  Result<JobLine> missing = ParseJobLine({"-np", "2", "--multi-prog", "/nonexistent/mp.conf"}, {});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() == "multi-prog /nonexistent/mp.conf: no such file");
  Result<JobLine> with_command = ParseJobLine({"-np", "2", "--multi-prog", "/dev/null", "--", "x"}, {});
  REQUIRE_FALSE(with_command.ok());
  CHECK(with_command.status().message() == "--multi-prog: the file names each rank's command; got 'x' as well");
  Result<JobLine> device = ParseJobLine({"-np", "2", "--multi-prog", "/dev/null"}, {});
  REQUIRE_FALSE(device.ok());
  CHECK(device.status().message().starts_with("multi-prog /dev/null: "));
}

}  // namespace
}  // namespace dlaunch::launcher
