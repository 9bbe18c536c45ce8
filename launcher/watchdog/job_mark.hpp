// A mark that every process of one launcher's job carries in its environment,
// so that the watchdog can find each of them after a SIGKILL of the launcher,
// without having been told of them: a daemon that a worker started (fork,
// setsid, fork) leaves every worker's process group and session, but keeps the
// environment it was started with. The mark closes the window in which such a
// daemon, adopted but not yet registered (launcher/process/adopted.hpp), would
// escape; a process that clears its environment (`env -i`) still depends on the
// registration.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace dlaunch::launcher {

// The variable that holds the mark in each worker's environment.
inline constexpr std::string_view kJobMarkVar = "DLAUNCH_JOB_MARK";
// Default: at most this much of one process's environment is read (Linux allows
// more, but a worker's is rarely past a few KiB).
inline constexpr size_t kJobMarkEnvBytes = size_t{4} << 20;

// A fresh mark, 32 hex digits (128 random bits), unique to this launcher; the
// entry to look for is "DLAUNCH_JOB_MARK=<mark>". Io when the kernel gives no
// random bytes.
Result<std::string> NewJobMark();

// True when `environ`, the text of /proc/PID/environ (NUL-separated
// NAME=VALUE entries), holds `entry` as one whole entry. Never a pattern: the
// text is the process's own.
bool HasEnvEntry(std::string_view environ, std::string_view entry);

// The pids of the live processes on this machine, `skip` left out, whose
// environment holds `entry`. A process whose environment cannot be read
// (another user's, when this one is not root) is left out: it could not be
// signalled either.
std::vector<int> MarkedProcesses(std::string_view entry, int skip = 0);

// SIGKILLs every process MarkedProcesses finds, again until a look finds none
// (what a marked process forked meanwhile is marked too), at most `rounds`
// looks. Returns how many processes it signalled.
int KillMarked(std::string_view entry, int skip = 0, int rounds = 50);

}  // namespace dlaunch::launcher
