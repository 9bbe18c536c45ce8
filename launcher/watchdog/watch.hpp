// The watchdog's own side: a process that outlives a killed launcher and kills
// what it left. The launcher's side (launcher/process/process.hpp, Watchdog)
// starts it and tells it, on a pipe, which process groups and processes are the
// job's; when the pipe ends without a stop order (the launcher was SIGKILLed, or
// the OOM killer took it), the watchdog kills them all.
//
// It runs as its own small program, dlaunch-watch (launcher/watchdog/main.cpp),
// which dlaunch starts by vfork and exec: a fork of dlaunch itself cost a third
// of a one-node job's CPU on a virtual machine (bench/profile/agent.md). Where
// the program is not beside dlaunch, or does not say that it watches
// (launcher/process/watch_helper.hpp), dlaunch forks and runs RunWatch itself.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace dlaunch::launcher {

// One order on the pipe; 16 bytes, so each write is atomic (< PIPE_BUF).
enum class WatchOp : int32_t { kStop, kAddGroup, kRemoveGroup, kAddProcess, kRemoveProcess };
struct WatchMessage {
  WatchOp op;
  int32_t id;
  uint64_t start_time;  // kAddProcess: field 22 of /proc/PID/stat
};
static_assert(sizeof(WatchMessage) == 16);

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
// InvalidArgument names the bad argument.
std::vector<std::string> WatchArgs(const WatchOrders& orders);
Result<WatchOrders> ParseWatchArgs(const std::vector<std::string>& args);

// The mark travels on the orders pipe instead, as its first bytes, before any
// WatchMessage: a 4-byte length, then a challenge of kWatchChallengeSize bytes
// and the entry. Nothing but the two ends of the pipe ever holds it there.
// (The helper's environment would also do, as /proc/PID/environ is the owner's
// alone, but then the helper would itself be a marked process that every
// search for the job's processes must leave out.) At most this long, so that
// the record is one atomic write (< PIPE_BUF) that fits an empty pipe of any
// size.
inline constexpr size_t kMaxMarkEntry = 256;
inline constexpr size_t kWatchChallengeSize = 32;
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

// What the helper writes once it has its orders and is watching: kWatchAck and
// the challenge it read. The launcher then knows that the program beside it is
// a working dlaunch-watch, not a stale or foreign one that exits at once (or
// happens to print a 'W') and leaves the job unwatched: only a program that
// read its orders knows the challenge.
inline constexpr char kWatchAck = 'W';
std::string WatchAnswer(std::string_view challenge);

// The watchdog's life, in the process that is to be it: its own process group,
// terminal signals ignored (they are the launcher's), WatchAnswer(challenge)
// written to `ack_fd` when it is not -1, then stdout and stderr on /dev/null (so that a
// reader of the launcher's output sees EOF when the launcher goes, and `ack_fd`
// may be one of them), and stdin too unless `fd` is 0. Records the orders read
// from `fd` until a kStop (exits 0 at once) or EOF, then kills: each registered
// process still the one registered, with its descendants and group, each
// registered group, and every process holding the mark; then removes the
// cleanup paths and exits 0.
[[noreturn]] void RunWatch(int fd, const WatchOrders& orders, int ack_fd = -1, std::string_view challenge = {});

}  // namespace dlaunch::launcher
