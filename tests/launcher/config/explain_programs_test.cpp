// ExplainPrograms: --explain's lines for the groups say how their ranks were
// given: in group order for the colon syntax, line by line for --multi-prog.
#include <string>

#include <catch2/catch.hpp>

#include "launcher/config/multi_prog.hpp"
#include "launcher/config/groups.hpp"

namespace dlaunch::launcher {
namespace {

TEST_CASE("ExplainPrograms: colon groups are numbered in group order", "[groups]") {
  envmap::ProgramPlan plan;
  envmap::ProgramGroup a, b;
  a.role = "a";
  a.line = "group 1";
  a.argv = {"A"};
  b.role = "b";
  b.line = "group 2";
  b.argv = {"B", "x"};
  plan.groups = {a, b};
  plan.per_node = {1, 3};
  envmap::JobLayout layout;
  layout.nodes = {envmap::Node{"", "", 4, {}}};
  Result<envmap::ProgramTable> table = TableFor(plan, layout);
  REQUIRE(table.ok());
  CHECK(ExplainPrograms(*table) ==
        "groups: 2 programs, ranks numbered in group order on each node\n"
        "  group 1 a: ranks 0 (1): A\n"
        "  group 2 b: ranks 1-3 (3): B x\n");
}

TEST_CASE("ExplainPrograms: a multi-prog file gives each rank its line, not group order", "[groups]") {
  Result<envmap::ProgramTable> table = ParseMultiProg("1,3 odd %t\n* even %o\n", "job.conf", 4);
  REQUIRE(table.ok());
  CHECK(ExplainPrograms(*table) ==
        "groups: 2 programs, each rank runs the line of the --multi-prog file that names it\n"
        "  job.conf:1 line1: ranks 1,3 (2): odd %t\n"
        "  job.conf:2 line2: ranks 0,2 (2): even %o\n");
}

}  // namespace
}  // namespace dlaunch::launcher
