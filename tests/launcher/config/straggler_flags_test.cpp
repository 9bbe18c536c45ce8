// --straggler-*: what each takes, the one line a bad value gets, and how the
// plan carries them.
#include "launcher/config/straggler_flags.hpp"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/config/cli.hpp"
#include "launcher/config/plan.hpp"

namespace dlaunch::launcher {
namespace {

using namespace std::chrono_literals;

Result<StragglerFlags> StragglerRead(std::vector<std::string> args) {
  args.push_back("train.py");
  Result<Options> o = ParseCommandLine(args, {});
  if (!o.ok()) return o.status();
  return StragglerFlagsFor(*o);
}

TEST_CASE("straggler detection is on by default, every 60s, reporting", "[straggler_flags]") {
  StragglerFlags f = StragglerRead({}).value();
  CHECK(f.enabled());
  CHECK(f.window == 60s);
  CHECK_FALSE(f.stop);
  CHECK(f.threshold == Approx(0.10));
  CHECK(f.ignore.empty());
  CHECK_FALSE(f.native);
  CHECK(f.file.empty());
}

TEST_CASE("the straggler flags as typed", "[straggler_flags]") {
  StragglerFlags f = StragglerRead({"--straggler-window", "2", "--straggler-action", "stop", "--straggler-ignore",
                                    "save_checkpoint", "--straggler-ignore", "data.py:17", "--straggler-threshold",
                                    "25", "--straggler-native", "--straggler-file", "/tmp/bad-nodes"})
                         .value();
  CHECK(f.window == 2s);
  CHECK(f.stop);
  CHECK(f.ignore == std::vector<std::string>{"save_checkpoint", "data.py:17"});
  CHECK(f.threshold == Approx(0.25));
  CHECK(f.native);
  CHECK(f.file == "/tmp/bad-nodes");
  CHECK_FALSE(StragglerRead({"--straggler-window", "0"}).value().enabled());
  CHECK(StragglerRead({"--straggler-window=1.5"}).value().window == 1500ms);
}

TEST_CASE("a bad straggler flag gets one line naming it", "[straggler_flags]") {
  struct Row {
    std::vector<std::string> args;
    std::string line;
  } rows[] = {
      {{"--straggler-window", "x"}, "--straggler-window: expected seconds from 1 to"},
      {{"--straggler-window", "0.5"}, "--straggler-window: expected seconds from 1 to"},
      {{"--straggler-window", "-1"}, "--straggler-window: expected seconds"},
      {{"--straggler-window", "99999999999"}, "--straggler-window: expected seconds"},
      {{"--straggler-action", "kill"}, "--straggler-action"},
      {{"--straggler-threshold", "0"}, "--straggler-threshold: expected a percentage above 0 and under 100, got '0'"},
      {{"--straggler-threshold", "100"}, "--straggler-threshold: expected a percentage"},
      {{"--straggler-threshold", "nan"}, "--straggler-threshold: expected a percentage"},
      {{"--straggler-ignore", ""}, "--straggler-ignore: expected a function, file or FILE:LINE"},
      {{"--straggler-ignore", "a\nb"}, "--straggler-ignore: expected a function"},
      {{"--straggler-file", ""}, "--straggler-file: expected a path"},
      {{"--straggler-window", "0", "--straggler-action", "stop"},
       "--straggler-action: not with --straggler-window 0 (detection off)"},
  };
  for (const Row& row : rows) {
    INFO(row.args.front() << " " << row.args.back());
    Result<StragglerFlags> f = StragglerRead(row.args);
    REQUIRE_FALSE(f.ok());
    CHECK(f.status().message().find(row.line) != std::string::npos);
  }
}

TEST_CASE("the plan carries the straggler flags, and --explain says them", "[straggler_flags]") {
  Result<Options> o = ParseCommandLine({"--straggler-window", "5", "--straggler-action", "stop", "x.py"}, {});
  REQUIRE(o.ok());
  Result<Plan> p = Decide(*o, envmap::Detect({}), MachineFacts{"here", 2, {}, "fresh"}, {});
  REQUIRE(p.ok());
  CHECK(p->workers()->straggler.window == 5s);
  CHECK(p->workers()->straggler.stop);
  CHECK(ExplainStraggler(StragglerFlags{}).empty());  // the default goes unsaid
  std::string explain = ExplainStraggler(p->workers()->straggler);
  CHECK(explain.find("compared every 5s (--straggler-window)") != std::string::npos);
  CHECK(explain.find("stop the job, exit code 122") != std::string::npos);
}

TEST_CASE("a head passes the straggler flags on to its agents", "[straggler_flags]") {
  for (const char* flag : {"straggler-window", "straggler-action", "straggler-ignore", "straggler-threshold",
                           "straggler-native", "straggler-file"}) {
    INFO(flag);
    CHECK(ForAgents(flag));
  }
}

}  // namespace
}  // namespace dlaunch::launcher
