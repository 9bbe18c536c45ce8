// Real processes: the watchdog that outlives a killed launcher. Spawning a
// worker in its own process group, pipes and resolving a command are
// launcher/core/spawn.hpp, included here for this folder's users.
#pragma once

#include <cstdint>
#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "launcher/core/spawn.hpp"
#include "launcher/watchdog/watch.hpp"

namespace dlaunch::launcher {

// A forked helper that kills every registered process group with SIGKILL when
// the launcher dies without saying goodbye (SIGKILL, OOM killer). PDEATHSIG
// covers the workers themselves, but not their children (a dataloader, a shell's
// background job); the watchdog covers those. Registered processes (the
// launcher's children, adopted daemons among them: launcher/process/adopted.hpp) are
// killed too, with their descendants and their process group, if they are
// still the process registered (same pid and start time). So is every process
// whose environment holds the job mark (launcher/watchdog/job_mark.hpp): a daemon
// adopted too recently to be registered yet, or one whose parent left before it
// was adopted. The watchdog itself: launcher/watchdog/watch.hpp.
class Watchdog {
 public:
  // `helper`: the dlaunch-watch program to start; empty: fork this process
  // instead. `second_stage`: the dlaunch that the helper executes when the
  // launcher is gone (launcher/watchdog/watch.hpp's WatchMain); empty: this
  // process's own binary (a descriptor of /proc/self/exe, which the helper
  // inherits), which must then be dlaunch.
  explicit Watchdog(std::string helper = WatchHelperPath(), std::string second_stage = "");
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog();

  // The dlaunch-watch beside this program (/proc/self/exe's folder), or empty
  // when there is none to execute.
  static std::string WatchHelperPath();

  // Starts the watchdog: the helper when there is one and it says that it
  // watches (launcher/process/watch_helper.hpp), else a fork of this process.
  // Call once, before any worker starts. If the launcher dies, `cleanup_dir`
  // and `cleanup_file` (each when not empty) are removed after the kill.
  Status Start(const std::string& cleanup_dir, const std::string& cleanup_file = "");
  // After Start: why the helper is not the watchdog, for one line on stderr
  // ("HELPER: what went wrong; the watchdog is a fork of dlaunch instead");
  // empty when it is, or when there was none to start.
  const std::string& fallback_note() const { return fallback_note_; }
  void Add(int pgid);
  void Remove(int pgid);
  // `start_time` is field 22 of /proc/PID/stat (ProcStat::start_time): a pid
  // reused by an unrelated process after `pid` exited is left alone. The
  // launcher's own process group is never killed (a `dlaunch | tee` pipeline).
  void AddProcess(int pid, uint64_t start_time);
  void RemoveProcess(int pid);
  // Normal exit: the watchdog leaves without killing anything.
  void Stop();
  // True while a group is registered (workers run).
  bool has_groups() const { return !groups_.empty(); }
  // Since when groups have been registered without a break (meaningful while has_groups()).
  std::chrono::steady_clock::time_point groups_since() const { return groups_since_; }
  // Called when the first group is registered after none was (workers start).
  void OnGroups(std::function<void()> hook) { on_groups_ = std::move(hook); }
  // The watchdog's pid, or -1 before Start.
  int pid() const { return pid_; }
  // The value of kJobMarkVar that every worker's environment must hold for the
  // watchdog to find its descendants unregistered; empty before Start or when
  // no mark could be made (then only registered processes are found).
  const std::string& job_mark() const { return job_mark_; }

 private:
  void Send(WatchOp op, int id, uint64_t start_time = 0);
  std::string helper_;
  std::string second_stage_;
  int fd_ = -1;
  int pid_ = -1;
  std::string job_mark_;
  std::string fallback_note_;
  std::set<int> groups_;  // registered, as the watchdog has them
  std::chrono::steady_clock::time_point groups_since_{};
  std::function<void()> on_groups_;
};

}  // namespace dlaunch::launcher
