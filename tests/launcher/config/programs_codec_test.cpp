// DLAUNCH_PROGRAMS: what a head sends its agents, and what an agent refuses.
#include "launcher/config/programs_codec.hpp"

#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "launcher/config/colon_groups.hpp"
#include "launcher/config/groups.hpp"
#include "launcher/config/plan.hpp"

namespace dlaunch::launcher {
namespace {

envmap::ProgramPlan TwoGroups() {
  envmap::ProgramPlan p;
  envmap::ProgramGroup trainer;
  trainer.role = "trainer";
  trainer.line = "group 1";
  trainer.argv = {"python3", "-u", "train.py", "--lr", "0.1 0.2"};
  trainer.local_rank_arg_at = 4;
  trainer.env = {{"SECRET", "a\nb\"c"}, {"EMPTY", ""}};
  trainer.gpus = {"0", "GPU-8f3c"};
  envmap::ProgramGroup rollout;
  rollout.role = "rollout";
  rollout.line = "group 2";
  rollout.argv = {"serve", "%t"};
  rollout.expand = true;
  rollout.ompi = true;
  rollout.horovod = true;
  p.groups = {trainer, rollout};
  p.per_node = {2, 1};
  p.node_counts = {{2, 0}, {0, 1}, {1, 1}};
  p.restarts = {{"rollout", 3}};
  return p;
}

TEST_CASE("the groups travel to an agent whole", "[programs_codec]") {
  envmap::ProgramPlan sent = TwoGroups();
  Result<envmap::ProgramPlan> got = DecodePrograms(EncodePrograms(sent));
  REQUIRE(got.ok());
  REQUIRE(got->groups.size() == 2);
  for (size_t g = 0; g < 2; ++g) {
    INFO("group " << g);
    const envmap::ProgramGroup &a = sent.groups[g], &b = got->groups[g];
    CHECK(b.role == a.role);
    CHECK(b.line == a.line);
    CHECK(b.argv == a.argv);
    CHECK(b.local_rank_arg_at == a.local_rank_arg_at);
    CHECK(b.expand == a.expand);
    CHECK(b.env == a.env);
    CHECK(b.ompi == a.ompi);
    CHECK(b.azure == a.azure);
    CHECK(b.horovod == a.horovod);
    CHECK(b.gpus == a.gpus);
    CHECK(b.exe.empty());  // found again on the agent's machine
  }
  CHECK(got->per_node == sent.per_node);
  CHECK(got->node_counts == sent.node_counts);
  CHECK(got->restarts == sent.restarts);
}

TEST_CASE("an agent refuses any other document in one line", "[programs_codec]") {
  std::string good = EncodePrograms(TwoGroups());
  auto with = [&good](const std::string& from, const std::string& to) {
    std::string s = good;
    size_t at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  static const std::string kPrefix = "DLAUNCH_PROGRAMS: ";
  const struct {
    const char* what;
    std::string text;
    const char* message;
  } cases[] = {
      {"not JSON", "{\"groups\":", "the groups: not JSON (incomplete JSON)"},
      {"no groups", "{}", "the groups: 'groups' is not a list of 1 to 1024 groups"},
      {"empty groups", "{\"groups\":[]}", "the groups: 'groups' is not a list of 1 to 1024 groups"},
      {"a role not a string", with("\"role\":\"trainer\"", "\"role\":7"), "group 1: 'role' is not a string"},
      {"an empty command", with("\"argv\":[\"serve\",\"%t\"]", "\"argv\":[]"), "group 2: no role or no command"},
      {"argv of numbers", with("\"argv\":[\"serve\",\"%t\"]", "\"argv\":[1]"),
       "group 2: 'argv' holds something other than strings"},
      {"a negative count", with("\"per_node\":[2,1]", "\"per_node\":[2,-1]"),
       "the groups: a count is not a whole number from 0 to 1048576"},
      {"a huge count", with("\"per_node\":[2,1]", "\"per_node\":[2,99999999999999]"),
       "the groups: a count is not a whole number from 0 to 1048576"},
      {"a short row", with("[0,1]", "[0]"), "the groups: a row of counts is not 2 whole numbers"},
      {"env not pairs", with("[\"EMPTY\",\"\"]", "[\"EMPTY\"]"),
       "group 1: 'env' holds something other than [NAME, VALUE] pairs"},
      {"a flag not a bool", with("\"ompi\":false", "\"ompi\":0"), "group 1: 'ompi' is not true or false"},
      {"restarts not pairs", with("[\"rollout\",3]", "[\"rollout\",-3]"),
       "the groups: 'restarts' holds something other than [ROLE, N] pairs"},
      {"too deep", "{\"groups\":[[[[[[[[1]]]]]]]]}", "the groups: not JSON (too deep)"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    Result<envmap::ProgramPlan> got = DecodePrograms(c.text);
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().message() == kPrefix + c.message);
  }
  std::string huge = "{\"groups\":[\"" + std::string(size_t{1} << 20, 'x') + "\"]}";
  CHECK(DecodePrograms(huge).status().message() == kPrefix + "the groups: over 1048576 bytes");
}

TEST_CASE("a head places each group on its hosts; its agents read the groups", "[programs_codec]") {
  Result<JobLine> head =
      ParseJobLine({"-H",        "n1:2,n2:2", "--role",  "trainer", "-x",    "K=1", "--",     "train",  ":",  "-H",
                    "n3:1,n1:1", "--role",    "rollout", "--",      "serve", ":",   "--role", "critic", "--", "critic"},
                   {});
  REQUIRE(head.ok());
  // The hosts in the order first named, each running the sum of its groups.
  CHECK(head->options.host_list == "n1:4,n2:3,n3:1");
  CHECK(head->options.exports.empty());  // the trainer's -x, in its group
  CHECK_FALSE(head->options.nproc_given);
  const envmap::ProgramPlan& p = head->programs;
  // A group without hosts of its own runs its count on the first group's.
  CHECK(p.node_counts == std::vector<std::vector<int>>{{2, 1, 1}, {2, 0, 1}, {0, 1, 0}});
  // What an agent gets, it reads in place of the ':'s, whatever its own command line.
  envmap::EnvMap agent_env = {{std::string(kProgramsVar), EncodePrograms(p)}};
  Result<JobLine> agent = ParseJobLine({"--nproc-per-node", "4", "--", "train"}, agent_env);
  REQUIRE(agent.ok());
  CHECK(agent->programs.node_counts == p.node_counts);
  CHECK(agent->programs.groups[1].argv == std::vector<std::string>{"serve"});
  CHECK(agent->programs.groups[0].env == envmap::EnvVars{{"K", "1"}});
  // An agent whose own count or node count disagrees with the head's rows is
  // refused before it joins the others.
  auto agent_plan = [&](std::vector<std::string> args) -> Result<Plan> {
    Result<JobLine> line = ParseJobLine(args, agent_env);
    if (!line.ok()) return line.status();
    Result<Plan> plan = Decide(line->options, envmap::Detected{}, MachineFacts{"here", 4, {}, "fresh"}, {});
    if (!plan.ok()) return plan;
    return WithPrograms(std::move(*plan), line->programs);
  };
  std::vector<std::string> join = {"--rdzv-endpoint", "127.0.0.1:29400", "--nnodes", "3", "--node-rank", "1"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = join;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  CHECK(agent_plan(with({"--nproc-per-node", "3", "--", "train"})).ok());
  CHECK(agent_plan(with({"--nproc-per-node", "4", "--", "train"})).status().message() ==
        "node 1 runs 4 workers, but its groups make 3");
  join[3] = "2";
  CHECK(agent_plan(with({"--nproc-per-node", "3", "--", "train"})).status().message() ==
        "the groups name 3 nodes, but the job has 2");
  agent_env[std::string(kProgramsVar)] = "junk";
  Result<JobLine> bad = ParseJobLine({"--nproc-per-node", "4", "--", "train"}, agent_env);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().starts_with("DLAUNCH_PROGRAMS: the groups: not JSON"));
}

TEST_CASE("a head refuses hosts it cannot place", "[programs_codec]") {
  Result<JobLine> filter = ParseJobLine({"-H", "n1,n2", "--exclude", "n2", "--", "a", ":", "-H", "n3", "--", "b"}, {});
  REQUIRE_FALSE(filter.ok());
  CHECK(filter.status().message() == "--include, --exclude: not with several groups; give each group its own hosts");
  Result<JobLine> over = ParseJobLine({"-H", "n1:60000", "--", "a", ":", "-H", "n1:60000", "--", "b"}, {});
  REQUIRE_FALSE(over.ok());
  CHECK(over.status().message().starts_with("host n1: the groups place 120000 workers there, over the limit of"));
  // Enough groups on one host that their sum passes 2^31: still refused, not wrapped.
  std::vector<std::string> many;
  for (int g = 0; g < 32769; ++g) {
    if (g > 0) many.push_back(":");
    many.insert(many.end(), {"-H", "n1:65536", "--role", fmt::format("r{}", g), "--", "a"});
  }
  Result<JobLine> wrapped = ParseJobLine(many, {});
  REQUIRE_FALSE(wrapped.ok());
  CHECK(wrapped.status().message().starts_with("host n1: the groups place 2147549184 workers there"));
  // Without a head (an endpoint given), a group's own hosts mean nothing.
  Result<JobLine> agent = ParseJobLine(
      {"--rdzv-endpoint", "h:1", "--nnodes", "2", "-H", "n1,n2", "--", "a", ":", "-H", "n3", "--", "b"}, {});
  REQUIRE_FALSE(agent.ok());
  CHECK(agent.status().message() ==
        "group 2 (group2): hosts of its own (-H, --hostfile) need a head launch with a node list before the first ':'");
}

}  // namespace
}  // namespace dlaunch::launcher
