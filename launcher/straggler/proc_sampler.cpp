#include "launcher/straggler/proc_sampler.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <memory>
#include <span>

#include <fmt/format.h>

namespace dlaunch::launcher {
namespace {

// O_NONBLOCK: opening a FIFO planted where a file should be must not wait for
// a writer (fstat then refuses it). O_NOFOLLOW: a link is not the kernel's file.
constexpr int kFileFlags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
// The longest symbol the kernel prints (KSYM_NAME_LEN); cut to kMaxWchan once read.
constexpr std::size_t kMaxWchanFile = 512;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

bool GoneErrno(int e) { return e == ENOENT || e == ESRCH; }

// The regular file `name` below `dir_fd`, whole, in `buf`; nullopt when it
// cannot be opened or read, is no regular file, or fills `buf` (over the cap:
// refused, since a cut stat line could end in a ')' of its comm). `gone` is set
// when it failed because the file's thread has exited.
std::optional<std::string_view> ReadWhole(int dir_fd, const char* name, std::span<char> buf, bool* gone) {
  Fd fd(openat(dir_fd, name, kFileFlags));
  if (fd.get() < 0) {
    *gone = GoneErrno(errno);
    return std::nullopt;
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  ssize_t n = 0;
  do {
    n = read(fd.get(), buf.data(), buf.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    *gone = GoneErrno(errno);
    return std::nullopt;
  }
  // A regular file reads short only at its end, so one read is the whole file
  // (no second read to see 0), and a full buffer is a file over the cap.
  if (static_cast<std::size_t>(n) >= buf.size()) return std::nullopt;
  return std::string_view(buf.data(), static_cast<std::size_t>(n));
}

// The next field separated by spaces, consumed from `rest`; empty at the end.
std::string_view NextField(std::string_view& rest) {
  std::size_t start = rest.find_first_not_of(' ');
  if (start == std::string_view::npos) {
    rest = {};
    return {};
  }
  rest.remove_prefix(start);
  std::size_t end = rest.find_first_of(" \n");
  std::string_view field = rest.substr(0, end);
  rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
  return field;
}

// A directory entry of task/ that names a thread: decimal digits only.
std::optional<int> Tid(const char* name) {
  std::string_view s(name);
  int tid = 0;
  if (s.empty() || s.size() > 9) return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), tid);
  if (ec != std::errc() || end != s.data() + s.size() || tid <= 0) return std::nullopt;
  return tid;
}

std::optional<TaskStat> ReadStat(int task_fd, int tid, bool* gone) {
  char name[32];
  std::snprintf(name, sizeof name, "%d/stat", tid);
  std::array<char, kMaxStatFile + 1> buf;
  std::optional<std::string_view> text = ReadWhole(task_fd, name, buf, gone);
  return text ? ParseTaskStat(*text) : std::nullopt;
}

// A wchan as a key may hold it: printable, no space, cut; "unknown" for none.
std::string SaneWchan(std::string_view w) {
  while (!w.empty() && (w.back() == '\n' || w.back() == ' ')) w.remove_suffix(1);
  if (w.empty() || w == "0") return std::string(kUnknownWchan);
  std::string out(w.substr(0, kMaxWchan));
  for (char& c : out)
    if (c <= 0x20 || c >= 0x7f) c = '?';
  return out;
}

std::string ReadWchan(int task_fd, int tid) {
  char name[32];
  std::snprintf(name, sizeof name, "%d/wchan", tid);
  std::array<char, kMaxWchanFile + 1> buf;
  bool gone = false;
  std::optional<std::string_view> text = ReadWhole(task_fd, name, buf, &gone);
  return SaneWchan(text.value_or(""));
}

// What the threads read so far say, in the order a look decides.
struct Tally {
  bool running = false;
  int disk_tid = 0;  // the first thread in D
  bool alive = false;

  void Add(int tid, char state) {
    if (state == 'R') running = true;
    if (state == 'D' && disk_tid == 0) disk_tid = tid;
    if (state != 'Z' && state != 'X' && state != 'x') alive = true;
  }
};

// Reads one thread's stat into the tally; skips one that exited since the
// listing, or whose stat is junk.
void TallyThread(int task_fd, int tid, ProcessLook& look, Tally& tally) {
  bool gone = false;
  std::optional<TaskStat> s = ReadStat(task_fd, tid, &gone);
  if (!s) return;
  ++look.threads_read;
  tally.Add(tid, s->state);
  if (s->state == 'R') look.running_tid = tid;
}

// Reads the stat of every thread but the main one and `first_tid` (read
// already) until one is running or `max_threads` have been tried.
void ScanOtherThreads(int task_fd, int pid, int first_tid, std::size_t max_threads, std::size_t tried,
                      ProcessLook& look, Tally& tally) {
  // fdopendir owns the descriptor it is given; the look keeps task_fd for openat.
  int dup_fd = fcntl(task_fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(fdopendir(dup_fd), closedir);
  if (!dir) {
    close(dup_fd);
    return;
  }
  while (dirent* e = readdir(dir.get())) {
    std::optional<int> tid = Tid(e->d_name);
    if (!tid || *tid == pid || *tid == first_tid) continue;
    if (tried >= max_threads) {
      look.capped = true;
      return;
    }
    ++tried;
    TallyThread(task_fd, *tid, look, tally);
    if (tally.running) return;
  }
}

void Decide(int task_fd, int pid, const Tally& tally, ProcessLook& look) {
  if (tally.running) {
    look.state = ProcessState::kRunning;
  } else if (tally.disk_tid != 0) {
    look.state = ProcessState::kDiskWait;
    look.wchan = ReadWchan(task_fd, tally.disk_tid);
  } else if (tally.alive) {
    look.state = ProcessState::kSleeping;
    look.wchan = ReadWchan(task_fd, pid);
  } else {
    look.state = ProcessState::kZombie;
  }
}

// The main thread first: it carries the start time, and a running main thread
// (a busy rank's usual state) settles the look in one read. False, with the
// look's state set, when the look ends here.
bool TallyMainThread(int task_fd, int pid, ProcessLook& look, Tally& tally) {
  bool gone = false;
  std::optional<TaskStat> main = ReadStat(task_fd, pid, &gone);
  if (!main) {
    // A leader that exits before its threads stays listed as a zombie, so a
    // missing main thread means the whole process is gone.
    look.state = gone ? ProcessState::kGone : ProcessState::kUnreadable;
    return false;
  }
  look.start_time = main->start_time;
  look.threads_read = 1;
  tally.Add(pid, main->state);
  if (main->state == 'R') look.running_tid = pid;
  return true;
}

void TallyOtherThreads(int task_fd, int pid, int first_tid, std::size_t max_threads, ProcessLook& look, Tally& tally) {
  std::size_t tried = 1;
  if (first_tid == pid || first_tid <= 0) first_tid = 0;
  // The thread that ran last time likely runs now: read it before the rest.
  if (first_tid != 0 && tried < max_threads) {
    ++tried;
    TallyThread(task_fd, first_tid, look, tally);
    if (tally.running) return;
  }
  ScanOtherThreads(task_fd, pid, first_tid, max_threads, tried, look, tally);
}

}  // namespace

std::optional<TaskStat> ParseTaskStat(std::string_view text) {
  std::size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(close + 1);
  std::string_view state = NextField(rest);
  if (state.size() != 1 || std::string_view("RSDZTtXxKWPI").find(state[0]) == std::string_view::npos)
    return std::nullopt;
  for (int field = 4; field < 22; ++field)
    if (NextField(rest).empty()) return std::nullopt;
  std::string_view start = NextField(rest);
  TaskStat out{state[0], 0};
  auto [end, ec] = std::from_chars(start.data(), start.data() + start.size(), out.start_time);
  if (start.empty() || ec != std::errc() || end != start.data() + start.size()) return std::nullopt;
  return out;
}

ProcessLook LookAtProcess(const std::string& proc_root, int pid, std::size_t max_threads, int first_tid) {
  ProcessLook look;
  if (pid <= 0) return look;
  std::string task = fmt::format("{}/{}/task", proc_root, pid);
  Fd task_fd(open(task.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (task_fd.get() < 0) {
    look.state = GoneErrno(errno) ? ProcessState::kGone : ProcessState::kUnreadable;
    return look;
  }
  Tally tally;
  if (!TallyMainThread(task_fd.get(), pid, look, tally)) return look;
  if (!tally.running) TallyOtherThreads(task_fd.get(), pid, first_tid, max_threads, look, tally);
  Decide(task_fd.get(), pid, tally, look);
  return look;
}

std::string LookKey(const ProcessLook& look) {
  switch (look.state) {
    case ProcessState::kRunning:
      return "running";
    case ProcessState::kDiskWait:
      return "disk-wait in " + look.wchan;
    case ProcessState::kSleeping:
      return std::string(kSleepingIn) + look.wchan;
    default:
      return {};
  }
}

bool CountLook(const ProcessLook& look, RankSamples& samples) {
  std::string key = LookKey(look);
  if (key.empty()) return false;
  ++samples.ticks;
  auto it = samples.top.find(key);
  if (it != samples.top.end()) {
    ++it->second;
    return true;
  }
  bool room = samples.top.size() + 1 < kMaxSampleKeys;
  ++samples.top[room ? key : std::string(kOtherFrames)];
  return true;
}

NativeSampler::NativeSampler(std::string proc_root, std::chrono::milliseconds period)
    : proc_root_(std::move(proc_root)), period_(period) {}

void NativeSampler::Watch(int pid) {
  Watched& w = pids_[pid];
  w = Watched{};
  w.samples.period_ms = period_.count();
}

void NativeSampler::Forget(int pid) { pids_.erase(pid); }

void NativeSampler::Tick(std::chrono::steady_clock::time_point now) {
  for (auto it = pids_.begin(); it != pids_.end();) {
    if (TickOne(it->first, it->second, now))
      ++it;
    else
      it = pids_.erase(it);
  }
}

bool NativeSampler::TickOne(int pid, Watched& w, std::chrono::steady_clock::time_point now) {
  ProcessLook look = LookAtProcess(proc_root_, pid, kMaxLookThreads, w.running_tid);
  w.running_tid = look.running_tid;
  if (look.state == ProcessState::kGone) return false;
  if (look.start_time != 0) {
    if (w.start_time == 0) w.start_time = look.start_time;
    if (w.start_time != look.start_time) return false;
  }
  if (!w.first_tick) w.first_tick = now;
  CountLook(look, w.samples);
  // Plus one period: n ticks on time span n periods, as a hook's file says.
  w.samples.wall_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - *w.first_tick + period_).count();
  return true;
}

std::optional<RankSamples> NativeSampler::Samples(int pid) const {
  auto it = pids_.find(pid);
  if (it == pids_.end()) return std::nullopt;
  return it->second.samples;
}

}  // namespace dlaunch::launcher
