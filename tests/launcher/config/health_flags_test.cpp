// --health-check, --health-check-timeout, --health-check-interval: the table's
// setters refuse a bad value in one line, HealthCheckFor reads what was typed,
// the node's plan holds it, --explain shows it and a head passes it on.
#include "launcher/config/health_flags.hpp"

#include <catch2/catch.hpp>

#include "launcher/config/cli.hpp"
#include "launcher/config/plan.hpp"

namespace dlaunch::launcher {
namespace {

Options MustParse(std::vector<std::string> args) {
  Result<Options> o = ParseCommandLine(args, {});
  INFO(o.status().message());
  REQUIRE(o.ok());
  return *o;
}

std::string ParseError(std::vector<std::string> args) {
  Result<Options> o = ParseCommandLine(args, {});
  REQUIRE_FALSE(o.ok());
  return o.status().message();
}

Result<Plan> DecideFor(std::vector<std::string> args) {
  return Decide(MustParse(std::move(args)), envmap::Detect({}), MachineFacts{"here", 2, {}, "fresh"}, {});
}

}  // namespace

TEST_CASE("--health-check: none given, no check", "[health]") {
  Result<HealthCheckPlan> plan = HealthCheckFor(MustParse({"--", "true"}));
  REQUIRE(plan.ok());
  CHECK_FALSE(plan->enabled());
  CHECK(plan->timeout == std::chrono::seconds(60));
  CHECK(plan->interval == std::chrono::seconds(300));
  CHECK(ExplainHealthCheck(*plan).empty());
}

TEST_CASE("--health-check: the command and its timings as typed, the last one winning", "[health]") {
  Result<HealthCheckPlan> plan =
      HealthCheckFor(MustParse({"--health-check", "df -P /scratch", "--health-check-timeout", "5",
                                "--health-check-interval", "30", "--health-check-timeout", "1.5", "--", "true"}));
  REQUIRE(plan.ok());
  CHECK(plan->command == "df -P /scratch");
  CHECK(plan->timeout == std::chrono::milliseconds(1500));
  CHECK(plan->interval == std::chrono::seconds(30));
  CHECK(ExplainHealthCheck(*plan) ==
        "health check: 'df -P /scratch' before joining (timeout 1.5s; again every 30s while held out, and before a "
        "restart)\n");
  // The largest any duration flag takes: 30 days.
  Result<HealthCheckPlan> longest =
      HealthCheckFor(MustParse({"--health-check=true", "--health-check-interval", "2592000", "--", "true"}));
  REQUIRE(longest.ok());
  CHECK(longest->interval == std::chrono::hours(24 * 30));
}

TEST_CASE("--health-check: a bad value is one line naming the flag", "[health]") {
  CHECK(ParseError({"--health-check-timeout", "x", "--", "true"}) ==
        "--health-check-timeout: expected seconds from 1 to 2592000, got 'x'");
  CHECK(ParseError({"--health-check-timeout", "0", "--", "true"}) ==
        "--health-check-timeout: expected seconds from 1 to 2592000, got '0'");
  CHECK(ParseError({"--health-check-timeout", "0.5", "--", "true"}) ==
        "--health-check-timeout: expected seconds from 1 to 2592000, got '0.5'");
  CHECK(ParseError({"--health-check-interval", "-3", "--", "true"}) ==
        "--health-check-interval: expected seconds from 1 to 2592000, got '-3'");
  CHECK(ParseError({"--health-check-interval", "1e300", "--", "true"}) ==
        "--health-check-interval: expected seconds from 1 to 2592000, got '1e300'");
  CHECK(ParseError({"--health-check-interval", "99999999999999999999", "--", "true"}) ==
        "--health-check-interval: expected seconds from 1 to 2592000, got '99999999999999999999'");
  CHECK(ParseError({"--health-check-interval", "2592001", "--", "true"}) ==
        "--health-check-interval: expected seconds from 1 to 2592000, got '2592001'");
  CHECK(ParseError({"--health-check-timeout", "inf", "--", "true"}) ==
        "--health-check-timeout: expected seconds from 1 to 2592000, got 'inf'");
  CHECK(ParseError({"--health-check", "", "--", "true"}) ==
        "--health-check: expected a shell command, got an empty one");
  CHECK(ParseError({"--health-check", "  ", "--", "true"}) ==
        "--health-check: expected a shell command, got an empty one");
  // A timing alone would do nothing.
  Result<HealthCheckPlan> alone = HealthCheckFor(MustParse({"--health-check-timeout", "5", "--", "true"}));
  REQUIRE_FALSE(alone.ok());
  CHECK(alone.status().message() == "--health-check-timeout: only with --health-check CMD");
}

TEST_CASE("--health-check: a rendezvous node's plan holds it, and --explain shows it", "[health]") {
  Result<Plan> p = DecideFor({"--nnodes", "2:3", "--rdzv-backend", "c10d", "--rdzv-endpoint", "10.0.0.1:29400",
                              "--health-check", "nvidia-smi -L", "--health-check-timeout", "10", "--", "true"});
  INFO(p.status().message());
  REQUIRE(p.ok());
  const auto* agent = std::get_if<AgentPlan>(&p->run);
  REQUIRE(agent != nullptr);
  CHECK(agent->rendezvous.health.command == "nvidia-smi -L");
  CHECK(agent->rendezvous.health.timeout == std::chrono::seconds(10));
  CHECK(Explain(*p).find("health check: 'nvidia-smi -L' before joining (timeout 10s; again every 300s") !=
        std::string::npos);
  // Without the flag nothing changes: no check, no line.
  Result<Plan> plain = DecideFor({"--nnodes", "2:3", "--rdzv-endpoint", "10.0.0.1:29400", "--", "true"});
  REQUIRE(plain.ok());
  CHECK_FALSE(std::get<AgentPlan>(plain->run).rendezvous.health.enabled());
  CHECK(Explain(*plain).find("health check") == std::string::npos);
}

TEST_CASE("--health-check: refused where no node joins a rendezvous; a head passes it on", "[health]") {
  Result<Plan> single = DecideFor({"--health-check", "true", "--", "true"});
  REQUIRE_FALSE(single.ok());
  CHECK(single.status().message() ==
        "--health-check: only a rendezvous node checks itself before it joins (--rdzv-backend c10d --rdzv-endpoint "
        "HOST:PORT, or a head launch's nodes)");
  Result<Plan> bad_timing =
      DecideFor({"--nnodes", "2", "--rdzv-endpoint", "10.0.0.1:29400", "--health-check-interval", "9", "--", "true"});
  REQUIRE_FALSE(bad_timing.ok());
  CHECK(bad_timing.status().message() == "--health-check-interval: only with --health-check CMD");

  for (const char* flag : {"health-check", "health-check-timeout", "health-check-interval"}) {
    CHECK(ForAgents(flag));
    CHECK_FALSE(HeadOnly(flag));
  }
  Result<Plan> head =
      DecideFor({"-H", "a,b", "--health-check", "df /scratch", "--health-check-timeout", "7", "--", "true"});
  REQUIRE(head.ok());
  const auto& flags = std::get<HeadPlan>(head->run).agent_flags;
  auto at = std::find(flags.begin(), flags.end(), "--health-check");
  REQUIRE(at != flags.end());
  REQUIRE(at + 1 != flags.end());
  CHECK(*(at + 1) == "df /scratch");
  CHECK(std::find(flags.begin(), flags.end(), "--health-check-timeout") != flags.end());
}

}  // namespace dlaunch::launcher
