// The watchdog's own side: a process that outlives a killed launcher and kills
// what it left. The launcher's side (launcher/process/process.hpp, Watchdog)
// starts it and tells it, on a pipe, which process groups and processes are the
// job's; when the pipe ends without a stop order (the launcher was SIGKILLed, or
// the OOM killer took it), the watchdog kills them all.
//
// It runs as its own program, dlaunch-watch, which dlaunch starts by vfork and
// exec (a fork of dlaunch itself cost a third of a one-node job's CPU on a
// virtual machine, bench/profile/agent.md), in two stages. The first
// (launcher/watchdog/main.cpp) waits out the job: it links no library, so that
// its start costs what the kernel's exec does, and only keeps the orders. When
// the launcher is gone it executes dlaunch itself as the second stage
// (WatchMain below), which reads /proc and kills with RunWatch. Where the
// program is not beside dlaunch, or does not say that it watches
// (launcher/process/watch_helper.hpp), dlaunch forks and runs RunWatch itself.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "launcher/watchdog/watch_wire.hpp"

namespace dlaunch::launcher {

// What the watchdog is told when it starts.
struct WatchOrders {
  pid_t launcher_group = 0;  // never killed (a `dlaunch | tee` pipeline's group)
  std::string mark_entry;    // "DLAUNCH_JOB_MARK=<mark>" (job_mark.hpp); empty: none
  std::string cleanup_dir;   // removed after the kill; empty: none
  std::string cleanup_file;  // unlinked after the kill; empty: none
};

// The program's arguments for `orders`, and back: the group and the two paths.
// The mark is not among them: any user reads a program's arguments (ps,
// /proc/PID/cmdline), and with the mark a process of theirs could pass for one
// of the job's. ParseWatchArgs takes argv without the program's name;
// InvalidArgument names the bad argument. These are the second stage's; the
// first takes one more after them, the program to execute as the second.
std::vector<std::string> WatchArgs(const WatchOrders& orders);
Result<WatchOrders> ParseWatchArgs(const std::vector<std::string>& args);

// The mark travels on the orders pipe instead (watch_wire.hpp).
struct WatchRecord {
  std::string challenge;   // kWatchChallengeSize bytes, fresh for each start
  std::string mark_entry;  // empty: no mark
};
// The record for `record` (a challenge of kWatchChallengeSize bytes, a mark of
// at most kMaxMarkEntry).
std::string WatchMarkRecord(const WatchRecord& record);
// Reads the record from `fd`, which blocks until it is all there. Io naming
// what was wrong: EOF or an error before the end, a length shorter than the
// challenge or past it and kMaxMarkEntry.
Result<WatchRecord> ReadWatchMark(int fd);

// The helper's answer once it watches: kWatchAck and the challenge (watch_wire.hpp).
std::string WatchAnswer(std::string_view challenge);

// The watchdog's life, in the process that is to be it: its own process group,
// terminal signals ignored (they are the launcher's), stdout and stderr on
// /dev/null (so that a reader of the launcher's output sees EOF when the
// launcher goes), and stdin too unless `fd` is 0. Records the orders read from
// `fd` until a kStop (exits 0 at once) or EOF, then kills: each registered
// process still the one registered, with its descendants and group, each
// registered group, and every process holding the mark; then removes the
// cleanup paths and exits 0.
[[noreturn]] void RunWatch(int fd, const WatchOrders& orders);

// dlaunch-watch's second stage, `dlaunch` run as kWatchProgramName GROUP DIR
// FILE (`args`, without the program's name): the record and the orders on
// stdin, up to its end, then RunWatch. Returns 2, with one line on stderr, on
// bad arguments or a bad record.
int WatchMain(const std::vector<std::string>& args);

}  // namespace dlaunch::launcher
