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
// The job mark closes it (launcher/process/job_mark.hpp): every worker's
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

bool ParseNumber(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// The text of a small /proc file; nullopt when it cannot be opened (the
// process has gone, or the kernel has no such file).
std::optional<std::string> ReadFile(const std::string& path) {
  std::string out;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[4096];
  for (int i = 0; i < 64; ++i) {  // bounded: /proc files of a live process end
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

// The children of this process from /proc/self/task/*/children, or nullopt on
// kernels without CONFIG_PROC_CHILDREN (the CI machines), where the whole
// process table must be read instead.
std::optional<std::vector<int>> OwnChildren() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return std::nullopt;
  std::vector<int> out;
  bool supported = true;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::string path = fmt::format("/proc/self/task/{}/children", e->d_name);
    std::optional<std::string> text = ReadFile(path);
    if (!text) {
      supported = false;
      break;
    }
    std::string_view rest(*text);
    while (!rest.empty()) {
      size_t a = rest.find_first_not_of(' ');
      if (a == std::string_view::npos) break;
      size_t b = rest.find(' ', a);
      uint64_t pid = 0;
      if (ParseNumber(rest.substr(a, b == std::string_view::npos ? std::string_view::npos : b - a), pid))
        out.push_back(static_cast<int>(pid));
      rest = b == std::string_view::npos ? std::string_view() : rest.substr(b);
    }
  }
  closedir(dir);
  if (!supported) return std::nullopt;
  return out;
}

bool Gone(const ProcStat& p) { return p.state == 'Z' || p.state == 'X'; }

}  // namespace

Result<ProcStat> ParseStat(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(fmt::format("/proc stat: {} in '{}'", why, text.substr(0, 80)));
  };
  size_t open = text.find(" (");
  size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return bad("no command name");
  ProcStat s;
  uint64_t v = 0;
  if (!ParseNumber(text.substr(0, open), v) || v == 0 || v > INT32_MAX) return bad("bad pid");
  s.pid = static_cast<int>(v);
  // Fields after the command name, numbered as in proc(5): 3 is the state.
  std::vector<std::string_view> fields;
  std::string_view rest = text.substr(close + 1);
  while (!rest.empty() && fields.size() < 20) {
    size_t a = rest.find_first_not_of(" \n");
    if (a == std::string_view::npos) break;
    size_t b = rest.find_first_of(" \n", a);
    fields.push_back(rest.substr(a, b == std::string_view::npos ? std::string_view::npos : b - a));
    rest = b == std::string_view::npos ? std::string_view() : rest.substr(b);
  }
  if (fields.size() < 20) return bad("too few fields");
  if (fields[0].size() != 1) return bad("bad state");
  s.state = fields[0][0];
  auto field = [&](int n, int& out) {
    uint64_t x = 0;
    if (!ParseNumber(fields[static_cast<size_t>(n - 3)], x) || x > INT32_MAX) return false;
    out = static_cast<int>(x);
    return true;
  };
  if (!field(4, s.ppid) || !field(5, s.pgid) || !field(6, s.sid)) return bad("bad ppid, pgrp or session");
  if (!ParseNumber(fields[22 - 3], s.start_time)) return bad("bad start time");
  return s;
}

Result<ProcStat> ReadStat(int pid) {
  std::string text = ReadFile(fmt::format("/proc/{}/stat", pid)).value_or("");
  if (text.empty()) return Status::NotFound(fmt::format("process {}: gone", pid));
  Result<ProcStat> s = ParseStat(text);
  if (s.ok() && Gone(*s)) return Status::NotFound(fmt::format("process {}: gone (zombie)", pid));
  return s;
}

std::vector<ProcStat> ReadProcessTable() {
  std::vector<ProcStat> table;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return table;
  while (dirent* e = readdir(dir)) {
    uint64_t pid = 0;
    if (!ParseNumber(e->d_name, pid)) continue;
    std::string text = ReadFile(fmt::format("/proc/{}/stat", pid)).value_or("");
    if (Result<ProcStat> s = ParseStat(text); s.ok()) table.push_back(*s);
  }
  closedir(dir);
  return table;
}

std::vector<int> Descendants(const std::vector<ProcStat>& table, int root, int skip) {
  std::multimap<int, int> children;
  for (const ProcStat& p : table) children.emplace(p.ppid, p.pid);
  std::vector<int> out;
  std::vector<int> todo{root};
  std::set<int> seen{root};
  // Bounded by the table: each pid is visited once even if the table (read
  // while processes come and go) holds a cycle.
  while (!todo.empty()) {
    int parent = todo.back();
    todo.pop_back();
    auto [a, b] = children.equal_range(parent);
    for (auto it = a; it != b; ++it) {
      int child = it->second;
      if ((skip != 0 && child == skip) || !seen.insert(child).second) continue;
      out.push_back(child);
      todo.push_back(child);
    }
  }
  return out;
}

Adopted::Adopted(Watchdog& watchdog, std::chrono::milliseconds first_scan) : watchdog_(watchdog), first_scan_(first_scan) {}

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
  if (registered_.empty() && (!watchdog_.has_groups() || started - watchdog_.groups_since() < first_scan_))
    return;
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
