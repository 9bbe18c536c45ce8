// A head launch's groups, as its agents receive them: one JSON document in the
// variable DLAUNCH_PROGRAMS, sent over ssh's stdin with the -x values (not on
// the command line, where `ps` would show a group's -x values). The agent's
// ParseJobLine reads it in place of the ':'s, and its workers never inherit it.
#pragma once

#include <string>
#include <string_view>

#include "base/status.hpp"
#include "envmap/programs.hpp"

namespace dlaunch::launcher {

inline constexpr std::string_view kProgramsVar = "DLAUNCH_PROGRAMS";

// The groups (role, argv, where --local-rank goes, -x variables, dialects,
// GPUs), each node's counts and --role-restarts, as compact JSON.
std::string EncodePrograms(const envmap::ProgramPlan& programs);

// The document EncodePrograms wrote. Fails with one line naming the variable
// and what is wrong, for anything else: not JSON, a field missing or of the
// wrong type, a count out of range, over 1 MiB, more than 1,024 groups or
// 65,536 nodes, node rows not one count a group.
Result<envmap::ProgramPlan> DecodePrograms(std::string_view text);

}  // namespace dlaunch::launcher
