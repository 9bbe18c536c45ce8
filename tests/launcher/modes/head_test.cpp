#include "launcher/modes/head.hpp"

#include <algorithm>

#include <catch2/catch.hpp>

#include "launcher/config/cli.hpp"
#include "launcher/config/colon_groups.hpp"
#include "launcher/config/groups.hpp"
#include "launcher/config/plan.hpp"

namespace dlaunch::launcher {
namespace {

Options Parse(std::vector<std::string> args) {
  Result<Options> o = ParseCommandLine(args, {});
  INFO((o.ok() ? "" : o.status().message()));
  REQUIRE(o.ok());
  return *o;
}

// The head's plan for these flags and `hosts`, as Decide makes it.
HeadPlan Head(std::vector<std::string> args, std::vector<HostEntry> hosts, envmap::EnvMap env = {}) {
  Result<HeadPlan> h = HeadPlanFor(Parse(std::move(args)), env, std::move(hosts));
  INFO((h.ok() ? "" : h.status().message()));
  REQUIRE(h.ok());
  return *h;
}

Mode ModeOf(std::vector<std::string> args) {
  Result<Plan> p = Decide(Parse(std::move(args)), envmap::Detected{}, MachineFacts{}, {});
  INFO((p.ok() ? "" : p.status().message()));
  REQUIRE(p.ok());
  return p->mode();
}

}  // namespace

TEST_CASE("a hostfile or -H without --rdzv-endpoint is a head-node launch", "[head]") {
  CHECK(ModeOf({"-H", "a:2,b:2", "--", "true"}) == Mode::kHead);
  CHECK(ModeOf({"--nodes", "a,b", "--", "true"}) == Mode::kHead);
  CHECK(ModeOf({"--nodes", "a,b", "--rdzv-endpoint", "a:1", "--", "true"}) == Mode::kRendezvous);
  CHECK(ModeOf({"--nproc-per-node", "2", "--", "true"}) == Mode::kSingleNode);
  // A hostfile is read by Decide: one that is missing is named.
  Result<Plan> missing = Decide(Parse({"--hostfile", "/nonexistent/h", "--", "true"}), envmap::Detected{}, {}, {});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("/nonexistent/h") != std::string::npos);
}

TEST_CASE("each agent gets its node rank, worker count, the rendezvous and the user's flags", "[head]") {
  std::vector<HostEntry> hosts = {{"a", 4, {}}, {"b", 2, {}}};
  envmap::EnvMap env = {{"FROM_HEAD", "v"}};
  HeadPlan h = Head({"-H",
                     "a:4,b:2",
                     "--ssh-port",
                     "2222",
                     "-x",
                     "GLOO_SOCKET_IFNAME=eth0",
                     "-x",
                     "FROM_HEAD",
                     "-x",
                     "UNSET_HERE",
                     "--max-restarts=1",
                     "--rdzv-conf",
                     "heartbeat_timeout=2,is_host=1",
                     "--env",
                     "ompi",
                     "--",
                     "python",
                     "t.py",
                     "--lr",
                     "0.1"},
                    hosts, env);
  CHECK(h.exports_unset == std::vector<std::string>{"UNSET_HERE"});
  AgentCommand c = AgentCommandFor(h, 1, "/opt/dlaunch", "10.0.0.1:4000", "job7", "/w");
  CHECK(c.cwd == "/w");
  CHECK(c.env == std::vector<std::pair<std::string, std::string>>{{"GLOO_SOCKET_IFNAME", "eth0"}, {"FROM_HEAD", "v"}});
  CHECK(c.argv == std::vector<std::string>{"/opt/dlaunch",
                                           "--rdzv-endpoint",
                                           "10.0.0.1:4000",
                                           "--rdzv-id",
                                           "job7",
                                           "--nnodes",
                                           "2",
                                           "--node-rank",
                                           "1",
                                           "--nproc-per-node",
                                           "2",
                                           "--tag-output=[{node_rank},{rank}]: ",
                                           "--max-restarts",
                                           "1",
                                           "--rdzv-conf",
                                           "heartbeat_timeout=2,is_host=1",
                                           "--env",
                                           "ompi",
                                           "--rdzv-conf",
                                           "is_host=0",
                                           "--",
                                           "python",
                                           "t.py",
                                           "--lr",
                                           "0.1"});
}

TEST_CASE("--role-env values go to the agents over stdin, not on their command line", "[head]") {
  std::vector<HostEntry> hosts = {{"a", 1, {}}, {"b", 1, {}}};
  HeadPlan h = Head({"-H", "a,b", "--roles", "worker:1,ps:1", "--role-env", "ps:MAGIC=s e\ncret", "--role-env",
                     "worker:W=2", "-x", "X=1", "--", "t"},
                    hosts);
  AgentCommand c = AgentCommandFor(h, 1, "dl", "e:1", "r", "/");
  CHECK(c.env == std::vector<std::pair<std::string, std::string>>{
                     {"X", "1"}, {"DLAUNCH_ROLE_ENV_0", "ps:MAGIC=s e\ncret"}, {"DLAUNCH_ROLE_ENV_1", "worker:W=2"}});
  for (const std::string& a : c.argv) {
    CHECK(a != "--role-env");
    CHECK(a.find("cret") == std::string::npos);
  }
  CHECK(std::find(c.argv.begin(), c.argv.end(), "worker:1,ps:1") != c.argv.end());  // --roles stays
  CHECK(c.argv.back() == "t");
}

TEST_CASE("a group's own -x values count as values pdsh would show", "[head]") {
  // The head of `dlaunch ARGS`, groups and all, as main decides it.
  auto head = [](std::vector<std::string> args) {
    Result<JobLine> line = ParseJobLine(args, {});
    REQUIRE(line.ok());
    Result<Plan> plan = Decide(line->options, envmap::Detected{}, MachineFacts{}, {});
    if (plan.ok()) plan = WithPrograms(std::move(*plan), line->programs);
    INFO((plan.ok() ? "" : plan.status().message()));
    REQUIRE(plan.ok());
    return std::get<HeadPlan>(plan->run);
  };
  CHECK(SendsUserValues(head({"-H", "a,b", "-x", "K=v", "--", "t"})));
  CHECK_FALSE(SendsUserValues(head({"-H", "a,b", "--", "t"})));
  // -x before the first ':' is the first group's: in DLAUNCH_PROGRAMS, not the head's exports.
  HeadPlan groups = head({"-H", "a", "--role", "t", "-x", "K=v", "--", "t", ":", "-H", "b", "--role", "r", "--", "r"});
  CHECK(groups.exports.empty());
  CHECK(SendsUserValues(groups));
  CHECK(SendsUserValues(
      head({"-H", "a", "--role", "t", "--", "t", ":", "-H", "b", "--role", "r", "-x", "S=1", "--", "r"})));
  CHECK_FALSE(SendsUserValues(head({"-H", "a", "--role", "t", "--", "t", ":", "-H", "b", "--role", "r", "--", "r"})));
}

TEST_CASE("--nproc-per-node beats the list's slots; picked slots become CUDA_VISIBLE_DEVICES", "[head]") {
  std::vector<HostEntry> hosts = {{"a", 8, {}}, {"b", 8, {1, 3}}};
  HeadPlan h = Head({"--hostfile", "h", "--nproc-per-node", "2", "--no-tag", "train.py"}, hosts);
  AgentCommand c0 = AgentCommandFor(h, 0, "dl", "e:1", "r", "/");
  CHECK(c0.argv[10] == "2");
  CHECK(c0.argv[11] == "--no-tag");
  CHECK(c0.argv.back() == "train.py");  // torchrun form: no "--", the agent prepends python
  CHECK(c0.argv[c0.argv.size() - 2] == "is_host=0");
  AgentCommand c1 = AgentCommandFor(h, 1, "dl", "e:1", "r", "/");
  CHECK(c1.argv[10] == "2");
  CHECK(c1.env == std::vector<std::pair<std::string, std::string>>{{"CUDA_VISIBLE_DEVICES", "1,3"}});

  CHECK(AgentCommandFor(Head({"--hostfile", "h", "--", "x"}, hosts), 0, "dl", "e:1", "r", "/").argv[10] == "8");
  std::vector<HostEntry> bare = {{"a", std::nullopt, {}}, {"b", std::nullopt, {}}};
  CHECK(AgentCommandFor(Head({"-H", "a,b", "--nproc-per-node", "gpu", "--", "x"}, bare), 0, "dl", "e:1", "r", "/")
            .argv[10] == "gpu");
}

}  // namespace dlaunch::launcher
