// --role-restarts ROLE=N (repeatable): the group of role ROLE restarts alone,
// at most N times, when one of its workers fails; the other roles run on
// (envmap::ProgramGroup::restarts, launcher/process/supervisor_set.hpp). The
// flag table's row only checks each value's form; this part reads them all
// off Options::typed.
//
// Pure: no clock, no files.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.hpp"

namespace dlaunch::launcher {

struct Options;

// The most restarts one role may be given: a bound on the input, not a policy.
inline constexpr int kMaxRoleRestarts = 1000;

// One value, "ROLE=N": ROLE a name of printable ASCII without spaces, N a
// whole number from 0 to kMaxRoleRestarts. Fails (InvalidArgument) in one line
// naming the flag and the value: "--role-restarts: expected ROLE=N, got 'x'".
Result<std::pair<std::string, int>> ParseRoleRestarts(std::string_view value);

// Every --role-restarts typed, by role; empty when none is. Fails for a value
// ParseRoleRestarts refuses, or for a role given twice, naming it:
// "--role-restarts: role 'rollout' is given twice ('rollout=1', 'rollout=2')".
Result<std::map<std::string, int>> RoleRestartsFor(const Options& options);

}  // namespace dlaunch::launcher
