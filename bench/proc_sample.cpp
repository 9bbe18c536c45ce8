// proc_sample: what the native straggler sampler (launcher/straggler/
// proc_sampler.hpp) costs dlaunch's event loop, beside the cheapest /proc read.
//
//   proc_sample [PROCESSES [THREADS [REPS]]]      (default: 8 50 500)
//
// Starts PROCESSES children of THREADS threads each, every thread blocked in a
// pipe read (sleeping: the dearest look, which reads every thread's stat and
// the main thread's wchan; a running main thread settles a look in one read).
// Once every child shows THREADS threads in /proc it times, on this thread:
//   - REPS reads of one /proc/PID/stat (open, read, close), the reference,
//     and of one thread's, /proc/PID/task/PID/stat, what a look reads per thread;
//   - REPS NativeSampler::Tick over the PROCESSES pids.
// It prints one line,
//   stat_read_us=A task_stat_read_us=A2 tick_us=B per_thread_us=C processes=P threads=T reps=R
// with medians in microseconds (per_thread_us is tick_us / (P * T)), and
// checks that every Tick counted "sleeping in ..." once per process. Exits 1
// (one line on stderr says why) when a child does not start or a count is wrong.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "launcher/straggler/proc_sampler.hpp"

namespace {

using dlaunch::launcher::NativeSampler;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "proc_sample: %s\n", why.c_str());
  std::exit(1);
}

int Arg(int argc, char** argv, int i, int fallback) {
  if (argc <= i) return fallback;
  char* end = nullptr;
  long v = std::strtol(argv[i], &end, 10);
  if (*end != '\0' || v < 1 || v > 100000) Die(std::string("expected a count from 1 to 100000, got '") + argv[i] + "'");
  return static_cast<int>(v);
}

// A child whose THREADS threads (its main one included) all block reading `fd`,
// which never has data: the parent holds the write end open until it kills it.
pid_t StartChild(int threads, int fd) {
  pid_t pid = fork();
  if (pid < 0) Die("fork failed");
  if (pid > 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  auto block = [fd] {
    char c;
    while (read(fd, &c, 1) != 0) {
    }
  };
  for (int i = 1; i < threads; ++i) std::thread(block).detach();
  block();
  _exit(0);
}

std::size_t Threads(pid_t pid) {
  std::error_code ec;
  std::size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

void WaitForThreads(const std::vector<pid_t>& pids, int threads) {
  for (pid_t pid : pids) {
    int tries = 0;
    while (Threads(pid) < static_cast<std::size_t>(threads)) {
      if (++tries > 5000) Die("child " + std::to_string(pid) + " did not start its threads in 5 s");
      usleep(1000);
    }
  }
}

double MedianUs(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

double Us(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

double ReadUs(const std::string& path, int reps) {
  std::vector<double> us;
  char buf[4096];
  for (int i = 0; i < reps; ++i) {
    Clock::time_point a = Clock::now();
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, buf, sizeof buf) <= 0) Die("cannot read " + path);
    close(fd);
    us.push_back(Us(a, Clock::now()));
  }
  return MedianUs(us);
}

double TickUs(const std::vector<pid_t>& pids, int reps) {
  NativeSampler sampler("/proc", std::chrono::milliseconds(100));
  for (pid_t pid : pids) sampler.Watch(pid);
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    Clock::time_point a = Clock::now();
    sampler.Tick(a);
    us.push_back(Us(a, Clock::now()));
  }
  for (pid_t pid : pids) {
    std::optional<dlaunch::launcher::RankSamples> s = sampler.Samples(pid);
    if (!s || s->ticks != reps || s->top.size() != 1 || !s->top.begin()->first.starts_with("sleeping in "))
      Die("child " + std::to_string(pid) + ": the sampler did not count one sleeping look per Tick");
  }
  return MedianUs(us);
}

}  // namespace

int main(int argc, char** argv) {
  int processes = Arg(argc, argv, 1, 8);
  int threads = Arg(argc, argv, 2, 50);
  int reps = Arg(argc, argv, 3, 500);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) Die("pipe failed");
  std::vector<pid_t> pids;
  for (int i = 0; i < processes; ++i) pids.push_back(StartChild(threads, fds[0]));
  WaitForThreads(pids, threads);
  std::string proc = "/proc/" + std::to_string(pids[0]);
  double stat_us = ReadUs(proc + "/stat", reps);
  double task_stat_us = ReadUs(proc + "/task/" + std::to_string(pids[0]) + "/stat", reps);
  double tick_us = TickUs(pids, reps);
  for (pid_t pid : pids) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  std::printf(
      "stat_read_us=%.2f task_stat_read_us=%.2f tick_us=%.1f per_thread_us=%.2f processes=%d threads=%d reps=%d\n",
      stat_us, task_stat_us, tick_us, tick_us / (processes * threads), processes, threads, reps);
  return 0;
}
