// The words of `dlaunch status` and `dlaunch stacks`.
#include "launcher/config/live_options.hpp"

#include <catch2/catch.hpp>

namespace dlaunch::launcher {

TEST_CASE("dlaunch status/stacks words", "[live]") {
  Result<LivePlan> p = DecideLive("status", {"job42", "--watch", "--dir", "/d"});
  REQUIRE(p.ok());
  CHECK(p->run_id == "job42");
  CHECK(p->watch);
  CHECK(p->dir == "/d");
  CHECK(DecideLive("stacks", {"--watch"}).status().message() == "--watch: only 'dlaunch status' watches");
  CHECK(DecideLive("status", {"a", "b"}).status().message() == "b: one run id at most (already given: a)");
  CHECK(DecideLive("status", {"--dir"}).status().message() == "--dir: expected a directory");
  CHECK(DecideLive("status", {"--wach"}).status().message() == "--wach: unknown option (did you mean '--watch'?)");
  CHECK(DecideLive("stacks", {"--dri=/x"}).status().message() == "--dri=/x: unknown option (did you mean '--dir'?)");
  CHECK(DecideLive("status", {"--bogus"}).status().message() == "--bogus: unknown option (see dlaunch status --help)");
}

}  // namespace dlaunch::launcher
