// Starting dlaunch-watch, the watchdog's own program (launcher/watchdog/watch.hpp),
// and knowing that it watches: a program that starts but does not work (a
// stale dlaunch-watch of another protocol, a foreign binary in its place that
// exits at once) must not leave the job with no watchdog, silently.
#pragma once

#include <chrono>
#include <string>

#include "base/status.hpp"
#include "launcher/watchdog/watch.hpp"

namespace dlaunch::launcher {

// Default: how long the helper has to say that it watches. It takes well under
// a millisecond; one that exits fails at once, so this bounds only a program
// that neither answers nor exits.
inline constexpr std::chrono::milliseconds kWatchHelperAnswerTimeout{2'000};

// A started helper: its pid (this process's child, in a group of its own) and
// the write end of its orders pipe, which the caller owns (close-on-exec).
struct WatchHelper {
  int pid = -1;
  int orders_fd = -1;
};

// Starts `helper` with `orders`: the group, the paths and `second_stage` (the
// program it executes as the watchdog's second stage when the launcher is
// gone: this launcher's binary) in its arguments, the job mark as the first
// bytes on its stdin pipe (never in its arguments, which every user can read),
// and waits at most `limit` for it to write kWatchAck on its stdout. Returns it once it has. Otherwise Io "HELPER: what
// went wrong" (it cannot start; it exited, with its status and the start of what it wrote; no answer within `limit`),
// with nothing left behind: a helper that started is killed and reaped. Main thread only, before the caller reaps
// children with waitpid(-1) (SpawnWorker's rule, and it reaps the helper itself).
// `second_stage_fd`, when not -1, is a descriptor the helper inherits at its
// number (for a `second_stage` of /proc/self/fd/N).
Result<WatchHelper> StartWatchHelper(const std::string& helper, const WatchOrders& orders,
                                     const std::string& second_stage,
                                     std::chrono::milliseconds limit = kWatchHelperAnswerTimeout,
                                     int second_stage_fd = -1);

}  // namespace dlaunch::launcher
