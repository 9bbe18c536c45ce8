// --role-restarts ROLE=N: what it takes, the one line a bad value gets, the
// roles read off what was typed, and that a head passes it on to its agents.
#include "launcher/config/role_restarts.hpp"

#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/config/cli.hpp"

// Named, not anonymous: the unity build puts this file beside the other flags' tests.
namespace dlaunch::launcher::role_restarts_test {

std::string ParseError(std::vector<std::string> args) {
  Result<Options> o = ParseCommandLine(args, {});
  REQUIRE_FALSE(o.ok());
  return o.status().message();
}

Result<std::map<std::string, int>> Roles(std::vector<std::string> args) {
  Result<Options> o = ParseCommandLine(args, {});
  INFO(o.status().message());
  REQUIRE(o.ok());
  return RoleRestartsFor(*o);
}

TEST_CASE("--role-restarts: each role's restarts as typed, none when not given", "[role_restarts]") {
  CHECK(Roles({"--", "true"})->empty());
  CHECK(*Roles({"--role-restarts", "rollout=2", "--role_restarts=judge=0", "--role-restarts", "ps-1.a_b=1000",
                "t.py"}) == std::map<std::string, int>{{"rollout", 2}, {"judge", 0}, {"ps-1.a_b", 1000}});
  // After the script they are the script's.
  CHECK(Roles({"t.py", "--role-restarts", "x"})->empty());
  // Not torchrun's: no PET_ variable stands in for it (and none is checked).
  Result<Options> o = ParseCommandLine({"t.py"}, {{"PET_ROLE_RESTARTS", "junk"}});
  REQUIRE(o.ok());
  CHECK(RoleRestartsFor(*o)->empty());
}

TEST_CASE("--role-restarts: a bad value gets one line naming the flag and the value", "[role_restarts]") {
  for (std::string bad : {"x", "", "=2", "rollout"}) {
    INFO(bad);
    CHECK(ParseError({"--role-restarts", bad, "t.py"}) == "--role-restarts: expected ROLE=N, got '" + bad + "'");
  }
  for (std::string bad : {"a=", "a=-1", "a=+1", "a=1001", "a=1.5", "a= 1", "a=x", "a=99999999999999999999", "a=1=2"}) {
    INFO(bad);
    CHECK(ParseError({"--role-restarts", bad, "t.py"}) ==
          "--role-restarts: expected ROLE=N with N a whole number from 0 to 1000, got '" + bad + "'");
  }
  CHECK(ParseError({"--role-restarts", "my role=1", "t.py"}) ==
        "--role-restarts: expected ROLE=N with ROLE a name of printable characters, got 'my role=1'");
  CHECK(ParseError({"--role-restarts", "r\x1b[2J=1", "t.py"}) ==
        "--role-restarts: expected ROLE=N with ROLE a name of printable characters, got 'r\\x1b[2J=1'");
  CHECK(ParseError({"--role-restarts", "t.py"}).starts_with("--role-restarts: expected ROLE=N"));
  CHECK(ParseError({"--role-restarts"}) == "--role-restarts: expects a value");
}

TEST_CASE("--role-restarts: a role given twice is refused, naming it", "[role_restarts]") {
  Result<std::map<std::string, int>> r =
      Roles({"--role-restarts", "rollout=1", "--role-restarts", "judge=1", "--role-restarts", "rollout=2", "t.py"});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "--role-restarts: role 'rollout' is given twice ('rollout=1', 'rollout=2')");
  CHECK(Roles({"--role-restarts", "a=1", "--role-restarts", "a=1", "t.py"}).status().message() ==
        "--role-restarts: role 'a' is given twice ('a=1', 'a=1')");
}

TEST_CASE("--role-restarts: how each node supervises, so a head passes it on", "[role_restarts]") {
  CHECK(ForAgents("role-restarts"));
  CHECK_FALSE(HeadOnly("role-restarts"));
  Result<Options> o =
      ParseCommandLine({"-H", "a,b", "--role-restarts", "rollout=2", "--max-restarts", "3", "--", "true"}, {});
  REQUIRE(o.ok());
  CHECK(AgentFlags(*o) == std::vector<std::string>{"--role-restarts", "rollout=2", "--max-restarts", "3"});
}

}  // namespace dlaunch::launcher::role_restarts_test
