#include "launcher/process/adopted.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "launcher/core/event_loop.hpp"
#include "launcher/process/streams.hpp"

// Why tracking pids and not a cgroup: a cgroup v2 sub-group with cgroup.kill
// would kill every descendant with no race, but it needs a writable, delegated
// cgroup v2 tree. Users are often not root; Slurm and systemd own the cgroup a
// job runs in and do not delegate it; and hosts still mount cgroups in hybrid
// mode (the CI machines have v2 only at /sys/fs/cgroup/unified, no controllers,
// no nsdelegate). CI runs as root, so a cgroup path taken "when writable" would
// be the only one CI tests while users get the other. Tracking works the same
// everywhere, unprivileged: dlaunch is a child subreaper, so an orphan is
// reparented to it and shows up as its child. Scans leave a window: a daemon
// adopted less than a scan before a SIGKILL of dlaunch is not yet registered.
// The job mark closes it (launcher/watchdog/job_mark.hpp): every worker's
// environment holds a mark unique to this dlaunch, which its descendants
// inherit, and the watchdog kills every process that holds it, with no help
// from dlaunch. Only a daemon that also clears its environment (`env -i`)
// depends on the scans. At the end of a job there is no window: KillAll walks
// the whole tree below dlaunch until it is empty.
//
// Why SIGTERM first: adopted processes are outside every worker's process group,
// so the supervisor's SIGTERM-then-SIGKILL teardown never reached them; a
// daemon that writes logs or a checkpoint gets one chance to finish, as workers
// do. The grace is short (the job is over and the user waits) and ends as soon
// as they are gone.

namespace dlaunch::launcher {
namespace {

namespace asio = boost::asio;

// Default: how often KillAll looks again while processes are leaving.
constexpr std::chrono::milliseconds kPoll{10};
// Default: how many SIGKILL rounds KillAll makes before it gives up (a process
// in uninterruptible sleep can take a while to die; dlaunch must still exit).
constexpr int kKillRounds = 200;

}  // namespace

Adopted::Adopted(Watchdog& watchdog, std::chrono::milliseconds first_scan)
    : watchdog_(watchdog), first_scan_(first_scan) {}

Adopted::~Adopted() { *alive_ = false; }

void Adopted::Start(asio::io_context& io) {
  timer_ = std::make_unique<asio::steady_timer>(io);
  // While no worker runs the timer sleeps (a thousand agents waiting for their
  // host would otherwise each wake four times a second); workers wake it.
  watchdog_.OnGroups([this, alive = alive_] {
    if (*alive && timer_) Arm();
  });
  Scan();
  Arm();
}

void Adopted::Arm() {
  if (registered_.empty() && !watchdog_.has_groups()) {
    timer_->cancel();
    return;
  }
  // Without /proc/self/task/*/children a scan reads the whole process table
  // (about 15 ms with 1,000 processes): keep scanning to about 2% of a core, so
  // that many dlaunch on one busy machine do not starve each other.
  auto wait = std::max<std::chrono::steady_clock::duration>(interval_, last_scan_ * 50);
  auto next = std::chrono::steady_clock::now() + wait;
  // A quiet job's scans share their wakeup with the other periodic timers.
  if (wait >= kTimerGrid) next = OnTimerGrid(next);
  if (registered_.empty()) next = std::max(next, watchdog_.groups_since() + first_scan_);
  timer_->expires_at(next);
  // A handler already queued when the timer is cancelled still runs with
  // success, so it checks that this object lives, not only the error code.
  timer_->async_wait([this, alive = alive_](boost::system::error_code ec) {
    if (ec || !*alive || !timer_) return;
    Scan();
    Arm();
  });
}

void Adopted::Scan() {
  // Nothing is adopted before a worker runs: no scan while waiting for a
  // rendezvous (a thousand waiting agents on one machine would each read the
  // process table four times a second).
  // Nor in the first seconds of a run: workers that end at once (a thousand
  // agents running `true` on one machine) would pay a scan each for nothing. A
  // daemon started then is still killed at the end of the job, and after a
  // SIGKILL of dlaunch the watchdog finds it by its job mark.
  auto started = std::chrono::steady_clock::now();
  if (registered_.empty() && (!watchdog_.has_groups() || started - watchdog_.groups_since() < first_scan_)) return;
  std::map<int, uint64_t> before = registered_;
  ScanNow();
  last_scan_ = std::chrono::steady_clock::now() - started;
  if (registered_ != before) {
    stable_scans_ = 0;
    interval_ = kAdoptedScanInterval;
  } else if (++stable_scans_ >= kAdoptedStableScans) {
    interval_ = std::min(interval_ * 2, kAdoptedQuietInterval);
  }
}

void Adopted::ScanNow() {
  int self = getpid();
  std::map<int, uint64_t> now;
  // Reading every process's stat costs about 15 us each; the children files
  // cost that per child, which matters at 4 scans a second on a busy node.
  // A child seen by the last scan is still the same process when nothing has
  // been reaped since (Reaper::reaped): its stat is not read again, so that a
  // quiet job's scan reads one file per thread of dlaunch, not one per worker.
  uint64_t reaped = Reaper::reaped();
  bool same_pids = reaped == reaped_at_scan_;
  reaped_at_scan_ = reaped;
  if (std::optional<std::vector<int>> children = OwnChildren()) {
    for (int pid : *children) {
      if (pid == watchdog_.pid()) continue;
      auto known = registered_.find(pid);
      if (same_pids && known != registered_.end()) {
        now[pid] = known->second;
        continue;
      }
      if (Result<ProcStat> p = ReadStat(pid); p.ok()) now[pid] = p->start_time;
    }
  } else {
    for (const ProcStat& p : ReadProcessTable())
      if (p.ppid == self && p.pid != watchdog_.pid() && !Gone(p)) now[p.pid] = p.start_time;
  }
  for (auto [pid, start] : now) {
    auto it = registered_.find(pid);
    if (it == registered_.end() || it->second != start) watchdog_.AddProcess(pid, start);
  }
  for (const auto& entry : registered_)
    if (!now.contains(entry.first)) watchdog_.RemoveProcess(entry.first);
  registered_ = std::move(now);
}

std::vector<int> Adopted::registered() const {
  std::vector<int> out;
  for (const auto& entry : registered_) out.push_back(entry.first);
  return out;
}

int Adopted::KillAll(std::chrono::milliseconds grace) {
  if (timer_) {
    timer_->cancel();
    timer_.reset();
  }
  // Once the workers are reaped, no child but the watchdog means nothing was
  // adopted: one read of the children file each thread of dlaunch has, not of
  // the process table.
  std::optional<std::vector<int>> children = OwnChildren();
  if (children && std::ranges::all_of(*children, [this](int pid) { return pid == watchdog_.pid(); })) {
    for (const auto& entry : registered_) watchdog_.RemoveProcess(entry.first);
    registered_.clear();
    return 0;
  }
  int self = getpid();
  int own_group = getpgrp();
  int watch = watchdog_.pid();
  std::set<int> termed;
  std::set<int> signalled;
  // One look at the tree below dlaunch: reaps its zombie children, sends `sig`
  // to each live descendant (and its group) not yet sent it, and says whether
  // any is left.
  auto round = [&](int sig, std::set<int>& sent) {
    std::vector<ProcStat> table = ReadProcessTable();
    std::map<int, const ProcStat*> by_pid;
    for (const ProcStat& p : table) by_pid[p.pid] = &p;
    bool left = false;
    for (int pid : Descendants(table, self, watch)) {
      const ProcStat& p = *by_pid[pid];
      if (Gone(p)) {
        if (p.ppid == self) waitpid(pid, nullptr, WNOHANG);
        continue;
      }
      left = true;
      if (!sent.insert(pid).second) continue;
      signalled.insert(pid);
      kill(pid, sig);
      // Also the group: it may hold processes outside this tree (a daemon's
      // child whose parent already left and was reparented to init).
      if (p.pgid > 1 && p.pgid != own_group && p.pgid != watch) kill(-p.pgid, sig);
    }
    return left;
  };
  auto deadline = std::chrono::steady_clock::now() + grace;
  bool left = round(SIGTERM, termed);
  while (left && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(kPoll);
    left = round(SIGTERM, termed);
  }
  for (int i = 0; left && i < kKillRounds; ++i) {
    std::set<int> killed;  // SIGKILL again each round: cheap, and nothing escapes between rounds
    left = round(SIGKILL, killed);
    if (left) std::this_thread::sleep_for(kPoll);
  }
  for (const auto& entry : registered_) watchdog_.RemoveProcess(entry.first);
  registered_.clear();
  return static_cast<int>(signalled.size());
}

}  // namespace dlaunch::launcher
