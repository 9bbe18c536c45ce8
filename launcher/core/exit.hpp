// The one way to say why dlaunch stops before a job runs, and the exit codes it
// chooses itself (their table is envmap/defaults.hpp, shared with the rendezvous).
#pragma once

#include <string_view>

#include "envmap/defaults.hpp"

namespace dlaunch::launcher {

using envmap::kExitHang;
using envmap::kExitNotExecutable;
using envmap::kExitNotFound;
using envmap::kExitUsage;

// Writes "<who>: <message>\n" to stderr in one write and returns `code`.
int Fail(int code, std::string_view message, std::string_view who = "dlaunch");

}  // namespace dlaunch::launcher
