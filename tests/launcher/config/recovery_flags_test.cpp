// --max-no-progress-restarts and --restart-backoff: what each takes, the one
// line a bad value gets, how the plan carries them, and that a head passes
// them on to its agents.
#include "launcher/config/recovery_flags.hpp"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/config/cli.hpp"
#include "launcher/config/plan.hpp"

namespace dlaunch::launcher {
namespace {

using namespace std::chrono_literals;

std::string CliError(std::vector<std::string> args, const envmap::EnvMap& env = {}) {
  Result<Options> o = ParseCommandLine(args, env);
  REQUIRE_FALSE(o.ok());
  return o.status().message();
}

RecoveryFlags Read(std::vector<std::string> args) {
  Result<Options> o = ParseCommandLine(args, {});
  INFO(o.status().message());
  REQUIRE(o.ok());
  Result<RecoveryFlags> f = ReadRecoveryFlags(*o);
  REQUIRE(f.ok());
  return *f;
}

Plan MustDecide(std::vector<std::string> args) {
  Result<Options> o = ParseCommandLine(args, {});
  INFO(o.status().message());
  REQUIRE(o.ok());
  Result<Plan> p = Decide(*o, envmap::Detect({}), MachineFacts{"here", 2, {}, "fresh"}, {});
  INFO(p.status().message());
  REQUIRE(p.ok());
  return *p;
}

TEST_CASE("recovery flags: off unless given, then as typed, the last one winning", "[recovery]") {
  RecoveryFlags none = Read({"--", "true"});
  CHECK(none.max_no_progress_restarts == -1);
  CHECK(none.backoff_min == 0ms);
  CHECK(none.backoff_max == 0ms);
  RecoveryFlags f = Read({"--max-no-progress-restarts", "2", "--restart-backoff=10:300", "--", "true"});
  CHECK(f.max_no_progress_restarts == 2);
  CHECK(f.backoff_min == 10s);
  CHECK(f.backoff_max == 300s);
  f = Read({"--restart-backoff", "0.5:1.5", "--restart-backoff", "1:2", "--max_no_progress_restarts", "3", "t.py"});
  CHECK(f.backoff_min == 1s);
  CHECK(f.backoff_max == 2s);
  CHECK(f.max_no_progress_restarts == 3);
  f = Read({"--restart-backoff", "0.5:1.5", "t.py"});
  CHECK(f.backoff_min == 500ms);
  CHECK(f.backoff_max == 1500ms);
  f = Read({"--restart-backoff", "0:0", "t.py"});
  CHECK(f.backoff_max == 0ms);
  // After the script they are the script's.
  CHECK(Read({"t.py", "--max-no-progress-restarts", "x"}).max_no_progress_restarts == -1);
}

TEST_CASE("recovery flags: a bad value gets one line naming the flag and the value", "[recovery]") {
  CHECK(CliError({"--restart-backoff", "5:1", "t.py"}) ==
        "--restart-backoff: expected MIN:MAX seconds with MIN <= MAX, got '5:1'");
  for (std::string bad : {"10", "", ":", "a:b", "1:2:3", "-1:5", "1:inf", "nan:1", "1:", ":5"}) {
    INFO(bad);
    CHECK(CliError({"--restart-backoff", bad, "t.py"}) ==
          "--restart-backoff: expected MIN:MAX seconds with MIN <= MAX, got '" + bad + "'");
  }
  CHECK(CliError({"--restart-backoff", "1:99999999999", "t.py"}) ==
        "--restart-backoff: 99999999999 seconds is over the limit of 2592000, got '1:99999999999'");
  CHECK(CliError({"--restart-backoff", "0:5", "t.py"}) ==
        "--restart-backoff: MIN must be above 0 when MAX is (0:0 restarts at once), got '0:5'");
  for (std::string bad : {"0", "-1", "x", "1.5", "99999999999999999999"}) {
    INFO(bad);
    CHECK(CliError({"--max-no-progress-restarts", bad, "t.py"}) ==
          "--max-no-progress-restarts: expected a positive number, got '" + bad + "'");
  }
  CHECK(CliError({"--max-no-progress-restarts", "t.py"}).find("--max-no-progress-restarts") != std::string::npos);
  // Not torchrun's: no PET_ variable stands in for them (and none is checked).
  Result<Options> o = ParseCommandLine({"t.py"}, {{"PET_RESTART_BACKOFF", "junk"}});
  REQUIRE(o.ok());
  CHECK(ReadRecoveryFlags(*o)->backoff_max == 0ms);
}

TEST_CASE("recovery flags: the plan carries them, --explain shows them, a head passes them on", "[recovery]") {
  Plan p = MustDecide(
      {"--max-restarts", "5", "--max-no-progress-restarts", "2", "--restart-backoff", "10:300", "--", "true"});
  const WorkerPlan& w = *p.workers();
  CHECK(w.max_restarts == 5);
  CHECK(w.recovery.max_no_progress_restarts == 2);
  CHECK(w.recovery.backoff_min == 10s);
  CHECK(w.recovery.backoff_max == 300s);
  CHECK(Explain(p).find("restarts: up to 5 (--max-restarts); stop after 2 in a row without progress, exit code 123 "
                        "(--max-no-progress-restarts); wait 10s before each, doubling up to 5m "
                        "(--restart-backoff)\n") != std::string::npos);
  CHECK(Explain(MustDecide({"--max-restarts", "5", "--", "true"})).find("restarts:") == std::string::npos);

  CHECK(ForAgents("max-no-progress-restarts"));
  CHECK(ForAgents("restart-backoff"));
  Result<Options> o = ParseCommandLine(
      {"-H", "a,b", "--max-no-progress-restarts", "2", "--restart-backoff=1:2", "--max-restarts", "3", "--", "true"},
      {});
  REQUIRE(o.ok());
  CHECK(AgentFlags(*o) ==
        std::vector<std::string>{"--max-no-progress-restarts", "2", "--restart-backoff", "1:2", "--max-restarts", "3"});
}

TEST_CASE("ExplainRecovery: fractions and minutes as written", "[recovery]") {
  RecoveryFlags f;
  CHECK(ExplainRecovery(3, f).empty());
  f.backoff_min = 1500ms;
  f.backoff_max = 90s;
  CHECK(ExplainRecovery(3, f) ==
        "restarts: up to 3 (--max-restarts); wait 1.5s before each, doubling up to 90s "
        "(--restart-backoff)");
}

}  // namespace
}  // namespace dlaunch::launcher

namespace dlaunch::launcher {

TEST_CASE("--spares: a rendezvous node's, passed to the coordinator; refused elsewhere", "[recovery]") {
  CHECK(Read({"--spares", "2", "t.py"}).spares == 2);
  CHECK(Read({"t.py"}).spares == 0);
  for (std::string bad : {"-1", "x", "65537", "99999999999999999999", ""}) {
    INFO(bad);
    CHECK(CliError({"--spares", bad, "t.py"}) == "--spares: expected a number from 0 to 65536, got '" + bad + "'");
  }
  Plan p = MustDecide({"--nnodes", "4", "--spares", "1", "--max-no-progress-restarts", "2", "--restart-backoff",
                       "10:300", "--rdzv-endpoint", "10.0.0.1:29400", "--", "true"});
  const rendezvous::CoordinatorOptions& c = std::get<AgentPlan>(p.run).rendezvous.coordinator;
  CHECK(c.spares == 1);
  CHECK(c.max_no_progress_restarts == 2);
  CHECK(c.backoff_min == 10s);
  CHECK(c.backoff_max == 300s);
  Result<Options> o = ParseCommandLine({"--spares", "1", "--", "true"}, {});
  REQUIRE(o.ok());
  Result<Plan> single = Decide(*o, envmap::Detect({}), MachineFacts{"here", 2, {}, "fresh"}, {});
  REQUIRE_FALSE(single.ok());
  CHECK(single.status().message() ==
        "--spares: only a rendezvous node can wait as a spare (--rdzv-backend c10d --rdzv-endpoint HOST:PORT, or a "
        "head launch's nodes)");
  CHECK(ForAgents("spares"));
}

}  // namespace dlaunch::launcher
