// The exit codes dlaunch chooses itself, in one table, and the one way to say
// why it stops before a job runs. Once workers run, a job's code is theirs
// (launcher/process/summary.hpp); only main() returns a code to the shell.
#pragma once

#include <string_view>

namespace dlaunch::launcher {

inline constexpr int kExitUsage = 2;            // a bad flag, file or variable
inline constexpr int kExitNotExecutable = 126;  // the program exists but cannot run (as sh)
inline constexpr int kExitNotFound = 127;       // no such program (as sh)

// Writes "<who>: <message>\n" to stderr in one write and returns `code`.
int Fail(int code, std::string_view message, std::string_view who = "dlaunch");

}  // namespace dlaunch::launcher
