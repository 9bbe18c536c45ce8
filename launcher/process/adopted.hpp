// Processes the launcher adopted as a subreaper: a worker's daemon that
// double-forked and called setsid() leaves every worker process group and is
// reparented to dlaunch. This module finds them, registers them with the
// watchdog (so a SIGKILL of dlaunch still kills them) and kills them at the end
// of a job, so that no grandchild outlives dlaunch.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/status.hpp"
#include "launcher/process/process.hpp"
#include "launcher/watchdog/proc_table.hpp"

namespace dlaunch::launcher {

// Default: how often the children of dlaunch are looked for while workers run;
// less often when a scan is slow (at most about 2% of a core goes to scans). A
// daemon adopted less than this before a SIGKILL of dlaunch is not registered
// yet: the watchdog then finds it by the job mark in its environment
// (launcher/watchdog/job_mark.hpp), or not at all if it cleared its environment.
inline constexpr std::chrono::milliseconds kAdoptedScanInterval{250};
// Default: the interval a quiet job's scans back off to. After kAdoptedStableScans
// scans that found the same children, each next one waits twice as long, up to
// this; any change returns to kAdoptedScanInterval. A quiet 8-rank job then
// costs well under a second of CPU an hour even where each scan reads the whole
// process table (no /proc/self/task/*/children), at the price of a wider window
// in which a daemon adopted late in a long quiet run is known to the watchdog by
// its job mark alone.
inline constexpr std::chrono::milliseconds kAdoptedQuietInterval{4000};
inline constexpr int kAdoptedStableScans = 8;
// Default: how long workers run before the first scan.
inline constexpr std::chrono::milliseconds kAdoptedFirstScan{2000};
// Default: how long adopted processes have between SIGTERM and SIGKILL at the
// end of a job.
inline constexpr std::chrono::milliseconds kAdoptedGrace{1000};

// Finds and kills the processes adopted by this process. Use from the thread
// that runs `io` (Start) or the main thread; not thread-safe. The launcher must
// be a child subreaper (prctl PR_SET_CHILD_SUBREAPER) for orphans to come here.
class Adopted {
 public:
  // `watchdog` must be started and outlive this object.
  // Scans start once workers have run for `first_scan`.
  explicit Adopted(Watchdog& watchdog, std::chrono::milliseconds first_scan = kAdoptedFirstScan);
  Adopted(const Adopted&) = delete;
  Adopted& operator=(const Adopted&) = delete;
  ~Adopted();

  // Scans now and then every kAdoptedScanInterval on `io` until KillAll or
  // destruction. `io` must outlive this object.
  void Start(boost::asio::io_context& io);
  // Registers every child of this process not yet known (the watchdog left out)
  // with the watchdog, and unregisters those that have gone.
  void Scan();
  // Stops scanning and kills every descendant of this process but the watchdog:
  // SIGTERM to each pid and its process group, up to `grace` for them to go,
  // then SIGKILL until none is left (bounded). Reaps its children. Call only
  // when no worker is meant to run any more. Returns how many processes it
  // signalled.
  int KillAll(std::chrono::milliseconds grace = kAdoptedGrace);

  // The children registered with the watchdog by the last Scan (for tests).
  std::vector<int> registered() const;

 private:
  void Arm();
  void ScanNow();

  Watchdog& watchdog_;
  std::map<int, uint64_t> registered_;                         // pid -> start time
  uint64_t reaped_at_scan_ = 0;                                // Reaper::reaped() at the last scan
  std::chrono::steady_clock::duration last_scan_{};            // how long the last scan took
  std::chrono::milliseconds interval_ = kAdoptedScanInterval;  // until the next scan
  int stable_scans_ = 0;                                       // scans in a row that found the same children
  std::chrono::milliseconds first_scan_;
  std::unique_ptr<boost::asio::steady_timer> timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace dlaunch::launcher
