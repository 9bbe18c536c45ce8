// What dlaunch and its watchdog say to each other (launcher/watchdog/watch.hpp):
// the orders on the pipe and the handshake. Nothing here needs the C or C++
// library, so that dlaunch-watch's first stage (launcher/watchdog/main.cpp),
// which links neither, shares it with dlaunch.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace dlaunch::launcher {

// The watchdog's program, and the name its second stage answers to: dlaunch
// run with this as argv[0] and three arguments is the watchdog (launcher/main.cpp).
inline constexpr char kWatchProgramName[] = "dlaunch-watch";

// One order on the pipe; 16 bytes, so each write is atomic (< PIPE_BUF).
enum class WatchOp : int32_t { kStop, kAddGroup, kRemoveGroup, kAddProcess, kRemoveProcess };
struct WatchMessage {
  WatchOp op;
  int32_t id;
  uint64_t start_time;  // kAddProcess: field 22 of /proc/PID/stat
};
static_assert(sizeof(WatchMessage) == 16);

// The job mark travels on the orders pipe, as its first bytes, before any
// WatchMessage: a 4-byte length, then a challenge of kWatchChallengeSize bytes
// and the entry. Nothing but the two ends of the pipe ever holds it there.
// (The helper's environment would also do, as /proc/PID/environ is the owner's
// alone, but then the helper would itself be a marked process that every
// search for the job's processes must leave out.) At most this long, so that
// the record is one atomic write (< PIPE_BUF) that fits an empty pipe of any
// size.
inline constexpr size_t kMaxMarkEntry = 256;
inline constexpr size_t kWatchChallengeSize = 32;

// What the helper writes once it has its orders and is watching: kWatchAck and
// the challenge it read. The launcher then knows that the program beside it is
// a working dlaunch-watch, not a stale or foreign one that exits at once (or
// happens to print a 'W') and leaves the job unwatched: only a program that
// read its orders knows the challenge.
inline constexpr char kWatchAck = 'W';

}  // namespace dlaunch::launcher
