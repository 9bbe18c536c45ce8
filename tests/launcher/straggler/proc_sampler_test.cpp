#include "launcher/straggler/proc_sampler.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "tests/temp_dir.hpp"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using TimePoint = std::chrono::steady_clock::time_point;

// A stat line as the kernel writes it, fields 1 to 22 and two more.
std::string StatLine(int tid, std::string_view comm, char state, std::uint64_t start = 1000) {
  return fmt::format("{} ({}) {} 1 1 1 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 {} 0 0\n", tid, comm, state, start);
}

// A fake /proc in a temporary directory: PID/task/TID/{stat,wchan}.
class FakeProc {
 public:
  const std::string& root() const { return dir_.path; }
  std::string TaskDir(int pid, int tid) const { return fmt::format("{}/{}/task/{}", root(), pid, tid); }

  void Write(const std::string& path, std::string_view text) const {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  }
  void Thread(int pid, int tid, char state, std::uint64_t start = 1000) const {
    Write(TaskDir(pid, tid) + "/stat", StatLine(tid, "worker", state, start));
  }
  void Wchan(int pid, int tid, std::string_view text) const { Write(TaskDir(pid, tid) + "/wchan", text); }

 private:
  testing::TempDir dir_{"proc"};
};

TEST_CASE("a stat line's state and start time are read after its last ')'", "[proc_sampler]") {
  std::optional<TaskStat> s = ParseTaskStat(StatLine(7, "python3", 'S', 123456));
  REQUIRE(s);
  CHECK(s->state == 'S');
  CHECK(s->start_time == 123456);
  // The comm is the worker's to set: a fake state inside it is not the state.
  s = ParseTaskStat(StatLine(7, "x) R (y", 'D'));
  REQUIRE(s);
  CHECK(s->state == 'D');
  s = ParseTaskStat(StatLine(7, "a b ) (c)", 'Z', 5));
  REQUIRE(s);
  CHECK(s->state == 'Z');
  CHECK(s->start_time == 5);
}

TEST_CASE("a stat line that is not one is refused", "[proc_sampler]") {
  for (std::string_view bad :
       {"", "7 (x R 1 2", "7 (x) Q 1 1 1 0 -1 4 0 0 0 0 0 0 0 0 20 0 1 0 5",
        "7 (x) RR 1 1 1 0 -1 4 0 0 0 0 0 0 0 0 20 0 1 0 5", "7 (x) R 1 1 1",
        "7 (x) R 1 1 1 0 -1 4 0 0 0 0 0 0 0 0 20 0 1 0 5x", "7 (x) R 1 1 1 0 -1 4 0 0 0 0 0 0 0 0 20 0 1 0 -5",
        "7 (x) R 1 1 1 0 -1 4 0 0 0 0 0 0 0 0 20 0 1 0 99999999999999999999999"}) {
    INFO(bad);
    CHECK_FALSE(ParseTaskStat(bad));
  }
}

TEST_CASE("a running main thread settles the look in one read", "[proc_sampler]") {
  FakeProc proc;
  proc.Thread(10, 10, 'R', 777);
  proc.Thread(10, 11, 'D');
  ProcessLook look = LookAtProcess(proc.root(), 10);
  CHECK(look.state == ProcessState::kRunning);
  CHECK(look.start_time == 777);
  CHECK(look.threads_read == 1);
  CHECK(LookKey(look) == "running");
}

TEST_CASE("any running thread makes the process running, before a disk wait", "[proc_sampler]") {
  FakeProc proc;
  proc.Thread(10, 10, 'S');
  proc.Thread(10, 11, 'D');
  proc.Thread(10, 12, 'R');
  CHECK(LookKey(LookAtProcess(proc.root(), 10)) == "running");
}

TEST_CASE("a thread in disk wait names its own wchan", "[proc_sampler]") {
  FakeProc proc;
  proc.Thread(10, 10, 'S');
  proc.Wchan(10, 10, "do_epoll_wait");
  proc.Thread(10, 11, 'D');
  proc.Wchan(10, 11, "io_schedule");
  ProcessLook look = LookAtProcess(proc.root(), 10);
  CHECK(look.state == ProcessState::kDiskWait);
  CHECK(LookKey(look) == "disk-wait in io_schedule");
}

TEST_CASE("a sleeping process names the main thread's wchan", "[proc_sampler]") {
  FakeProc proc;
  proc.Thread(10, 10, 'S');
  proc.Wchan(10, 10, "futex_wait_queue\n");
  proc.Thread(10, 11, 'S');
  proc.Wchan(10, 11, "do_epoll_wait");
  proc.Thread(10, 12, 'T');
  ProcessLook look = LookAtProcess(proc.root(), 10);
  CHECK(look.state == ProcessState::kSleeping);
  CHECK(look.threads_read == 3);
  CHECK_FALSE(look.capped);
  CHECK(LookKey(look) == "sleeping in futex_wait_queue");
}

TEST_CASE("a wchan that says nothing is unknown; one that says too much is cut", "[proc_sampler]") {
  FakeProc proc;
  proc.Thread(10, 10, 'S');
  CHECK(LookKey(LookAtProcess(proc.root(), 10)) == "sleeping in unknown");  // no file
  for (std::string_view nothing : {"", "0", "0\n", "\n"}) {
    proc.Wchan(10, 10, nothing);
    CHECK(LookKey(LookAtProcess(proc.root(), 10)) == "sleeping in unknown");
  }
  proc.Wchan(10, 10, "a b\x1b[2J\x7f");
  CHECK(LookKey(LookAtProcess(proc.root(), 10)) == "sleeping in a?b?[2J?");
  proc.Wchan(10, 10, std::string(200, 'w'));
  CHECK(LookAtProcess(proc.root(), 10).wchan == std::string(kMaxWchan, 'w'));
  proc.Wchan(10, 10, std::string(100000, 'w'));  // over the file's cap: refused, not read
  CHECK(LookAtProcess(proc.root(), 10).wchan == "unknown");
}

TEST_CASE("a comm that holds ') (' does not hide the state", "[proc_sampler]") {
  FakeProc proc;
  proc.Write(proc.TaskDir(10, 10) + "/stat", StatLine(10, "evil) R (R) R", 'S'));
  proc.Write(proc.TaskDir(10, 11) + "/stat", StatLine(11, ") (", 'S'));
  ProcessLook look = LookAtProcess(proc.root(), 10);
  CHECK(look.state == ProcessState::kSleeping);
  CHECK(look.threads_read == 2);
}

// A look at process 10: a sleeping main thread and thread 11, whose stat file
// (its directory made) `make` lays out.
template <typename F>
ProcessLook LookWithOtherStat(F make) {
  FakeProc proc;
  proc.Thread(10, 10, 'S');
  fs::create_directories(proc.TaskDir(10, 11));
  make(proc, proc.TaskDir(10, 11) + "/stat");
  return LookAtProcess(proc.root(), 10);
}

TEST_CASE("a thread whose stat is no stat file is skipped, never waited on", "[proc_sampler]") {
  const std::string running = StatLine(11, "worker", 'R');
  auto skipped = [](const ProcessLook& look) {
    return look.state == ProcessState::kSleeping && look.threads_read == 1;
  };
  CHECK(skipped(LookWithOtherStat([](const FakeProc& p, const std::string& f) { p.Write(f, "R R R R\n"); })));
  CHECK(skipped(LookWithOtherStat([&](const FakeProc& p, const std::string& f) {
    p.Write(f, running + std::string(1 << 20, ' '));  // huge
  })));
  CHECK(skipped(LookWithOtherStat([&](const FakeProc& p, const std::string& f) {
    p.Write(f, running + std::string(kMaxStatFile + 1 - running.size(), ' '));  // just over the cap
  })));
  CHECK(skipped(LookWithOtherStat([&](const FakeProc& p, const std::string& f) {
    p.Write(p.root() + "/elsewhere", running);
    fs::create_symlink(p.root() + "/elsewhere", f);
  })));
  // A FIFO: an open without O_NONBLOCK would wait here for ever.
  CHECK(
      skipped(LookWithOtherStat([](const FakeProc&, const std::string& f) { REQUIRE(mkfifo(f.c_str(), 0600) == 0); })));
  // A thread that exited between the listing and the read: its directory is
  // listed, its stat gone.
  CHECK(skipped(LookWithOtherStat([](const FakeProc&, const std::string&) {})));
  // The same thread with a stat file that is one: read.
  CHECK(LookWithOtherStat([&](const FakeProc& p, const std::string& f) { p.Write(f, running); }).state ==
        ProcessState::kRunning);
}

TEST_CASE("a stat file just under the cap is read", "[proc_sampler]") {
  FakeProc proc;
  proc.Thread(10, 10, 'S');
  std::string running = StatLine(11, "worker", 'R');
  proc.Write(proc.TaskDir(10, 11) + "/stat", running + std::string(kMaxStatFile - running.size(), ' '));
  CHECK(LookAtProcess(proc.root(), 10).state == ProcessState::kRunning);
}

TEST_CASE("a process that is gone, unreadable or a zombie counts no tick", "[proc_sampler]") {
  FakeProc proc;
  CHECK(LookAtProcess(proc.root(), 10).state == ProcessState::kGone);  // no such directory
  CHECK(LookAtProcess(proc.root(), 0).state == ProcessState::kGone);
  CHECK(LookAtProcess(proc.root(), -1).state == ProcessState::kGone);
  proc.Thread(10, 11, 'R');  // a task list without the main thread
  CHECK(LookAtProcess(proc.root(), 10).state == ProcessState::kGone);
  proc.Write(proc.TaskDir(10, 10) + "/stat", "junk");
  CHECK(LookAtProcess(proc.root(), 10).state == ProcessState::kUnreadable);
  proc.Thread(10, 10, 'Z');
  proc.Thread(10, 11, 'X');
  ProcessLook look = LookAtProcess(proc.root(), 10);
  CHECK(look.state == ProcessState::kZombie);
  RankSamples samples;
  CHECK_FALSE(CountLook(look, samples));
  CHECK(samples == RankSamples{});
}

TEST_CASE("a main thread that exited before its others: the others are the process", "[proc_sampler]") {
  FakeProc proc;
  proc.Thread(10, 10, 'Z');
  proc.Wchan(10, 10, "0");
  proc.Thread(10, 11, 'S');
  CHECK(LookKey(LookAtProcess(proc.root(), 10)) == "sleeping in unknown");
  proc.Thread(10, 11, 'R');
  CHECK(LookKey(LookAtProcess(proc.root(), 10)) == "running");
}

TEST_CASE("a look reads no more threads than its cap", "[proc_sampler]") {
  FakeProc proc;
  proc.Thread(10, 10, 'S');
  for (int tid = 11; tid <= 20; ++tid) proc.Thread(10, tid, 'S');
  ProcessLook look = LookAtProcess(proc.root(), 10, 4);
  CHECK(look.threads_read == 4);
  CHECK(look.capped);
  look = LookAtProcess(proc.root(), 10, 11);
  CHECK(look.threads_read == 11);
  CHECK_FALSE(look.capped);
  // With a cap of one only the main thread is read: the others' R is not seen.
  for (int tid = 11; tid <= 20; ++tid) proc.Thread(10, tid, 'R');
  look = LookAtProcess(proc.root(), 10, 1);
  CHECK(look.state == ProcessState::kSleeping);
  CHECK(look.capped);
}

TEST_CASE("the default cap holds for a process of more threads than it", "[proc_sampler]") {
  FakeProc proc;
  proc.Thread(10, 10, 'S');
  for (int tid = 11; tid <= static_cast<int>(kMaxLookThreads) + 20; ++tid) proc.Thread(10, tid, 'S');
  ProcessLook look = LookAtProcess(proc.root(), 10);
  CHECK(look.threads_read == kMaxLookThreads);
  CHECK(look.capped);
}

TEST_CASE("the thread that ran last time is read right after the main thread", "[proc_sampler]") {
  FakeProc proc;
  proc.Thread(10, 10, 'S');
  for (int tid = 11; tid <= 30; ++tid) proc.Thread(10, tid, tid == 17 ? 'R' : 'S');
  ProcessLook look = LookAtProcess(proc.root(), 10);
  CHECK(look.state == ProcessState::kRunning);
  CHECK(look.running_tid == 17);
  look = LookAtProcess(proc.root(), 10, kMaxLookThreads, 17);
  CHECK(look.running_tid == 17);
  CHECK(look.threads_read == 2);
  // Within the cap, too: the main thread and the first one are all it reads.
  CHECK(LookAtProcess(proc.root(), 10, 2, 17).state == ProcessState::kRunning);
  // A first thread that no longer runs, or is gone, is read once, not twice.
  proc.Thread(10, 17, 'S');
  look = LookAtProcess(proc.root(), 10, kMaxLookThreads, 17);
  CHECK(look.state == ProcessState::kSleeping);
  CHECK(look.threads_read == 21);
  CHECK(look.running_tid == 0);
  look = LookAtProcess(proc.root(), 10, kMaxLookThreads, 99);
  CHECK(look.threads_read == 21);
  CHECK_FALSE(look.capped);
  CHECK(LookAtProcess(proc.root(), 10, kMaxLookThreads, 10).threads_read == 21);
}

TEST_CASE("a look counts one tick under its key, and keys past the cap as other frames", "[proc_sampler]") {
  RankSamples samples;
  ProcessLook look;
  look.state = ProcessState::kRunning;
  CHECK(CountLook(look, samples));
  CHECK(CountLook(look, samples));
  look.state = ProcessState::kSleeping;
  for (std::size_t i = 0; i < kMaxSampleKeys + 5; ++i) {
    look.wchan = fmt::format("wait_{}", i);
    CHECK(CountLook(look, samples));
  }
  CHECK(samples.ticks == 2 + static_cast<std::int64_t>(kMaxSampleKeys) + 5);
  CHECK(samples.top.size() == kMaxSampleKeys);
  CHECK(samples.top.at("running") == 2);
  CHECK(samples.top.at("sleeping in wait_0") == 1);
  CHECK(samples.top.at(std::string(kOtherFrames)) == 7);
  CHECK(samples.user.empty());
  look.state = ProcessState::kRunning;  // a key already there still counts as itself
  CHECK(CountLook(look, samples));
  CHECK(samples.top.at("running") == 3);
}

TEST_CASE("the sampler counts each watched pid once a tick, and forgets the gone", "[proc_sampler]") {
  FakeProc proc;
  proc.Thread(10, 10, 'R');
  proc.Thread(20, 20, 'S');
  proc.Wchan(20, 20, "pipe_read");
  NativeSampler sampler(proc.root(), milliseconds(100));
  sampler.Watch(10);
  sampler.Watch(20);
  CHECK(sampler.Samples(10) == RankSamples{.period_ms = 100});
  TimePoint t0{};
  for (int i = 0; i < 3; ++i) sampler.Tick(t0 + milliseconds(100 * i));
  std::optional<RankSamples> s = sampler.Samples(10);
  REQUIRE(s);
  CHECK(s->ticks == 3);
  CHECK(s->period_ms == 100);
  CHECK(s->wall_ms == 300);
  CHECK(s->top == FrameCounts{{"running", 3}});
  CHECK(sampler.Samples(20)->top == FrameCounts{{"sleeping in pipe_read", 3}});
  CHECK_FALSE(sampler.Samples(30));

  fs::remove_all(proc.root() + "/20");
  sampler.Tick(t0 + milliseconds(300));
  CHECK_FALSE(sampler.Samples(20));
  CHECK(sampler.watched() == 1);
  CHECK(sampler.Samples(10)->ticks == 4);
}

TEST_CASE("the sampler forgets a pid that names another process", "[proc_sampler]") {
  FakeProc proc;
  proc.Thread(10, 10, 'R', 500);
  NativeSampler sampler(proc.root(), milliseconds(100));
  sampler.Watch(10);
  sampler.Tick(TimePoint{});
  proc.Thread(10, 10, 'R', 900);
  sampler.Tick(TimePoint{} + milliseconds(100));
  CHECK_FALSE(sampler.Samples(10));
  // Watched again (a new worker got that pid), it counts from zero.
  sampler.Watch(10);
  sampler.Tick(TimePoint{} + milliseconds(200));
  CHECK(sampler.Samples(10)->ticks == 1);
  CHECK(sampler.Samples(10)->wall_ms == 100);
}

TEST_CASE("the sampler keeps a zombie's counts and counts it no more", "[proc_sampler]") {
  FakeProc proc;
  proc.Thread(10, 10, 'S');
  NativeSampler sampler(proc.root(), milliseconds(50));
  sampler.Watch(10);
  sampler.Tick(TimePoint{});
  proc.Thread(10, 10, 'Z');
  sampler.Tick(TimePoint{} + milliseconds(50));
  REQUIRE(sampler.Samples(10));
  CHECK(sampler.Samples(10)->ticks == 1);
  sampler.Forget(10);
  CHECK_FALSE(sampler.Samples(10));
  CHECK(sampler.watched() == 0);
}

// A child of this test, killed and reaped when the test ends.
class Child {
 public:
  template <typename F>
  explicit Child(F body) {
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      body();
      _exit(0);
    }
  }
  ~Child() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  int pid() const { return pid_; }
  // Kills the child and waits until it is a zombie, leaving it unreaped.
  void KillKeepZombie() const {
    kill(pid_, SIGKILL);
    siginfo_t info{};
    REQUIRE(waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) == 0);
  }
  void Reap() {
    REQUIRE(waitpid(pid_, nullptr, 0) == pid_);
    pid_ = 0;
  }

 private:
  int pid_ = 0;
};

TEST_CASE("/proc: a child that spins reads running, and no tick once it is dead", "[proc_sampler]") {
  Child spinner([] {
    volatile std::uint64_t n = 0;
    for (;;) n = n + 1;
  });
  NativeSampler sampler("/proc", milliseconds(10));
  sampler.Watch(spinner.pid());
  for (int i = 0; i < 20; ++i) sampler.Tick(TimePoint{} + milliseconds(10 * i));
  std::optional<RankSamples> s = sampler.Samples(spinner.pid());
  REQUIRE(s);
  CHECK(s->ticks == 20);
  // R is also "waiting for a CPU": a spinning process is R whether it has one
  // or not, so only the moment after fork, before it spins, could differ.
  CHECK(s->top["running"] >= 15);

  spinner.KillKeepZombie();
  CHECK(LookAtProcess("/proc", spinner.pid()).state == ProcessState::kZombie);
  sampler.Tick(TimePoint{} + milliseconds(300));
  CHECK(sampler.Samples(spinner.pid())->ticks == 20);
  int pid = spinner.pid();
  spinner.Reap();
  CHECK(LookAtProcess("/proc", pid).state == ProcessState::kGone);
  sampler.Tick(TimePoint{} + milliseconds(310));
  CHECK_FALSE(sampler.Samples(pid));
}

TEST_CASE("/proc: a child blocked on a pipe reads sleeping, never running", "[proc_sampler]") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  Child reader([fd = fds[0]] {
    char c;
    while (read(fd, &c, 1) != 0) {
    }
  });
  // Until the child reaches its read it may be running, or asleep elsewhere (a
  // page fault's wait on a loaded machine): wait for the first look that is
  // asleep in the read (a bounded number of them), then every look must be one.
  bool asleep = false;
  for (int i = 0; i < 2000 && !asleep; ++i) {
    ProcessLook look = LookAtProcess("/proc", reader.pid());
    asleep =
        look.state == ProcessState::kSleeping && (look.wchan.ends_with("pipe_read") || look.wchan == kUnknownWchan);
    if (!asleep) usleep(1000);
  }
  REQUIRE(asleep);
  NativeSampler sampler("/proc", milliseconds(10));
  sampler.Watch(reader.pid());
  for (int i = 0; i < 20; ++i) sampler.Tick(TimePoint{} + milliseconds(10 * i));
  std::optional<RankSamples> s = sampler.Samples(reader.pid());
  REQUIRE(s);
  CHECK(s->ticks == 20);
  REQUIRE(s->top.size() == 1);
  // The symbol is the kernel's (pipe_read, or anon_pipe_read in newer kernels),
  // or unknown where it hides it.
  std::string key = s->top.begin()->first;
  INFO(key);
  CHECK(key.starts_with("sleeping in "));
  CHECK((key.ends_with("pipe_read") || key == "sleeping in unknown"));
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace dlaunch::launcher
