#include "launcher/process/adopted.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <functional>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "launcher/process/streams.hpp"

#include "tests/launcher/process/process_checks.hpp"

using namespace dlaunch::launcher;
using dlaunch::testing::Contains;
using dlaunch::testing::GoneWithin;

namespace {

// Runs `body` in a forked process (so that it may become a subreaper and own the
// processes it starts) and returns its exit code; 0 means every check passed.
int InChild(const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Starts `sleep 300` as a daemon does: fork, setsid, fork again, the middle one
// exits. Returns the daemon's pid (now a child of this process if it is a
// subreaper), or -1. The daemon sends its pid itself, once it ignores SIGTERM
// when asked to: sent by the middle process, the pid could arrive before the
// daemon had run at all (a loaded machine), and a SIGTERM then still killed it.
int StartDaemon(bool ignore_term) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t middle = fork();
  if (middle == 0) {
    setsid();
    pid_t daemon = fork();
    if (daemon == 0) {
      // SIG_DFL otherwise: this fork still has Catch's handler until it execs,
      // and a SIGTERM from KillAll before the exec then printed a "FAILED"
      // report of this test from the daemon, although the test passed.
      signal(SIGTERM, ignore_term ? SIG_IGN : SIG_DFL);
      // The daemon says its pid once it ignores SIGTERM (kept across exec): a
      // pid sent by the middle process came before that, and a SIGTERM sent at
      // once then killed it (issue 19).
      pid_t self = getpid();
      ssize_t ignored = write(fds[1], &self, sizeof self);
      (void)ignored;
      close(fds[1]);
      execlp("sleep", "sleep", "300", static_cast<char*>(nullptr));
      _exit(127);
    }
    _exit(0);
  }
  close(fds[1]);
  int daemon = -1;
  if (read(fds[0], &daemon, sizeof daemon) != sizeof daemon) daemon = -1;
  close(fds[0]);
  waitpid(middle, nullptr, 0);
  return daemon;
}

}  // namespace

TEST_CASE("Scan registers an adopted setsid daemon and KillAll ends it", "[adopted]") {
  int code = InChild([] {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    Watchdog watchdog;
    if (!watchdog.Start("").ok()) return 10;
    int daemon = StartDaemon(false);
    if (daemon <= 0) return 11;
    auto stat = ReadStat(daemon);
    if (!stat.ok() || stat->ppid != getpid()) return 12;  // adopted by this subreaper
    Adopted adopted(watchdog, std::chrono::milliseconds(0));
    // No worker runs yet: nothing to look for, and no process table read.
    adopted.Scan();
    if (!adopted.registered().empty()) return 18;
    watchdog.Add(999999999);  // stands for a running worker's group (no such group exists)
    adopted.Scan();
    if (!Contains(adopted.registered(), daemon)) return 13;
    if (Contains(adopted.registered(), watchdog.pid())) return 14;
    if (adopted.KillAll() != 1) return 15;
    if (!GoneWithin(daemon, stat->start_time, std::chrono::milliseconds(0))) return 16;
    if (!adopted.registered().empty()) return 17;
    watchdog.Stop();
    return 0;
  });
  CHECK(code == 0);
}

TEST_CASE("Scans keep a child they saw until a Reaper reaps it, then see the next", "[adopted]") {
  int code = InChild([] {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    Watchdog watchdog;
    if (!watchdog.Start("").ok()) return 10;
    boost::asio::io_context io;
    std::vector<int> exited;
    Reaper reaper(
        io, [&](int pid, int) { exited.push_back(pid); }, nullptr);
    Adopted adopted(watchdog, std::chrono::milliseconds(0));
    watchdog.Add(999999999);  // stands for a running worker's group
    int first = StartDaemon(false);
    if (first <= 0) return 11;
    adopted.Scan();
    adopted.Scan();  // nothing reaped in between: the same child, not read again
    if (adopted.registered() != std::vector<int>{first}) return 12;
    uint64_t before = Reaper::reaped();
    kill(first, SIGKILL);
    // Until it is reaped the dead daemon is a zombie child, and stays registered.
    for (int i = 0; i < 300 && exited.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      reaper.ReapNow();
    }
    if (exited != std::vector<int>{first}) return 13;
    if (Reaper::reaped() != before + 1) return 14;
    int second = StartDaemon(false);
    if (second <= 0) return 15;
    reaper.ReapNow();  // the daemon's middle process was reaped by StartDaemon: nothing here
    if (Reaper::reaped() != before + 1) return 16;
    adopted.Scan();
    if (adopted.registered() != std::vector<int>{second}) return 17;
    adopted.KillAll();
    watchdog.Stop();
    return 0;
  });
  CHECK(code == 0);
}

TEST_CASE("KillAll finds nothing adopted when the watchdog is the only child, and leaves it running", "[adopted]") {
  int code = InChild([] {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    Watchdog watchdog;
    if (!watchdog.Start("").ok()) return 10;
    auto stat = ReadStat(watchdog.pid());
    if (!stat.ok() || stat->ppid != getpid()) return 11;  // the launcher's own child
    Adopted adopted(watchdog, std::chrono::milliseconds(0));
    if (adopted.KillAll() != 0) return 12;
    if (!ReadStat(watchdog.pid()).ok()) return 13;  // not killed as if adopted
    // A daemon adopted beside it is still found and ended.
    int daemon = StartDaemon(false);
    if (daemon <= 0) return 14;
    auto daemon_stat = ReadStat(daemon);
    if (!daemon_stat.ok()) return 15;
    if (adopted.KillAll() != 1) return 16;
    if (!GoneWithin(daemon, daemon_stat->start_time, std::chrono::milliseconds(0))) return 17;
    if (!ReadStat(watchdog.pid()).ok()) return 18;
    // Stopped, it exits 0 on its own (nothing killed it), for its parent to reap.
    int pid = watchdog.pid();
    watchdog.Stop();
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 19;
    return 0;
  });
  CHECK(code == 0);
}

TEST_CASE("KillAll sends SIGKILL after the grace to a daemon that ignores SIGTERM", "[adopted]") {
  int code = InChild([] {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    Watchdog watchdog;
    if (!watchdog.Start("").ok()) return 10;
    int daemon = StartDaemon(true);
    if (daemon <= 0) return 11;
    Adopted adopted(watchdog, std::chrono::milliseconds(0));
    auto t0 = std::chrono::steady_clock::now();
    adopted.KillAll(std::chrono::milliseconds(200));
    auto took = std::chrono::steady_clock::now() - t0;
    if (ReadStat(daemon).ok()) return 12;
    if (took < std::chrono::milliseconds(200)) return 13;  // it died of the SIGTERM
    if (took > std::chrono::seconds(3)) return 14;
    watchdog.Stop();
    return 0;
  });
  CHECK(code == 0);
}

TEST_CASE("After a SIGKILL of the launcher the watchdog kills adopted daemons and their children", "[adopted]") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t launcher = fork();
  if (launcher == 0) {
    close(fds[0]);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    Watchdog watchdog;
    if (!watchdog.Start("").ok()) _exit(10);
    int daemon = StartDaemon(false);
    // A worker (its own group) whose child left the session: not orphaned yet,
    // so only the walk below the registered worker finds it.
    int child_pipe[2];
    if (pipe(child_pipe) != 0) _exit(11);
    pid_t worker = fork();
    if (worker == 0) {
      setpgid(0, 0);
      pid_t child = fork();
      if (child == 0) {
        setsid();
        execlp("sleep", "sleep", "300", static_cast<char*>(nullptr));
        _exit(127);
      }
      ssize_t ignored = write(child_pipe[1], &child, sizeof child);
      (void)ignored;
      execlp("sleep", "sleep", "300", static_cast<char*>(nullptr));
      _exit(127);
    }
    int child = -1;
    if (read(child_pipe[0], &child, sizeof child) != sizeof child) _exit(12);
    watchdog.Add(worker);  // as the runner registers each worker's group
    Adopted adopted(watchdog, std::chrono::milliseconds(0));
    adopted.Scan();
    int pids[3] = {daemon, worker, child};
    if (write(fds[1], pids, sizeof pids) != sizeof pids) _exit(13);
    pause();
    _exit(14);
  }
  close(fds[1]);
  int pids[3] = {0, 0, 0};
  REQUIRE(read(fds[0], pids, sizeof pids) == sizeof pids);
  close(fds[0]);
  std::vector<uint64_t> starts;
  for (int pid : pids) {
    auto s = ReadStat(pid);
    REQUIRE(s.ok());
    starts.push_back(s->start_time);
  }
  kill(launcher, SIGKILL);
  waitpid(launcher, nullptr, 0);
  for (size_t i = 0; i < 3; ++i) {
    INFO("pid " << pids[i] << " (0: daemon, 1: worker, 2: the worker's setsid child)" << i);
    bool gone = GoneWithin(pids[i], starts[i], std::chrono::seconds(3));
    if (!gone) kill(pids[i], SIGKILL);
    CHECK(gone);
  }
}
