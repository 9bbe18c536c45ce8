// The one way to say why dlaunch stops before a job runs, and the exit codes it
// chooses itself (their table is base/defaults.hpp, shared with the rendezvous).
#pragma once

#include <string_view>

#include "base/defaults.hpp"

namespace dlaunch::launcher {

using base::kExitHang;
using base::kExitNotExecutable;
using base::kExitNotFound;
using base::kExitUsage;

// Writes "<who>: <message>\n" to stderr in one write and returns `code`.
int Fail(int code, std::string_view message, std::string_view who = "dlaunch");

}  // namespace dlaunch::launcher
