#include "launcher/watchdog/job_mark.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "launcher/process/adopted.hpp"
#include "launcher/process/process.hpp"
#include "tests/launcher/process/process_checks.hpp"

using namespace dlaunch::launcher;
using dlaunch::testing::Contains;
using dlaunch::testing::GoneWithin;
using namespace std::string_literals;

namespace {

// Starts `sleep 300` with `env` (NAME=VALUE entries) as its whole environment;
// with `daemon`, the way a daemon starts (fork, setsid, fork again, the middle
// one exits). Returns its pid, or -1.
int StartSleep(const std::vector<std::string>& env, bool daemon) {
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  char* argv[] = {const_cast<char*>("sleep"), const_cast<char*>("300"), nullptr};
  // Close-on-exec: the pipe reads EOF once `sleep` has exec'd (and the middle
  // process exited), so its environment is `env` by the time this returns.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  pid_t first = fork();
  if (first == 0) {
    if (daemon) {
      setsid();
      pid_t d = fork();
      if (d != 0) {
        ssize_t ignored = write(fds[1], &d, sizeof d);
        (void)ignored;
        _exit(0);
      }
    } else {
      pid_t self = getpid();
      ssize_t ignored = write(fds[1], &self, sizeof self);
      (void)ignored;
    }
    execve("/bin/sleep", argv, envp.data());
    _exit(127);
  }
  close(fds[1]);
  int pid = -1;
  if (read(fds[0], &pid, sizeof pid) != sizeof pid) pid = -1;
  char more;
  for (ssize_t n = 1; n != 0;) {
    n = read(fds[0], &more, 1);
    if (n < 0 && errno != EINTR) break;
  }
  close(fds[0]);
  if (daemon) waitpid(first, nullptr, 0);
  return pid;
}

void Reap(int pid) {
  kill(pid, SIGKILL);
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

TEST_CASE("HasEnvEntry finds only a whole entry of /proc/PID/environ", "[job_mark]") {
  const std::string mark = "DLAUNCH_JOB_MARK=00ff";
  struct Case {
    std::string environ;
    bool found;
  };
  for (const Case& c : std::vector<Case>{
           {"DLAUNCH_JOB_MARK=00ff\0"s, true},
           {"A=1\0DLAUNCH_JOB_MARK=00ff\0B=2\0"s, true},
           {"A=1\0DLAUNCH_JOB_MARK=00ff"s, true},  // no NUL after the last entry
           {""s, false},
           {"DLAUNCH_JOB_MARK=00f\0"s, false},
           {"DLAUNCH_JOB_MARK=00ffx\0"s, false},
           {"X_DLAUNCH_JOB_MARK=00ff\0"s, false},
           {"A=DLAUNCH_JOB_MARK=00ff\0"s, false},  // inside another variable's value
           {"\0\0\0"s, false},
       }) {
    INFO("environ: " << c.environ);
    CHECK(HasEnvEntry(c.environ, mark) == c.found);
  }
  CHECK_FALSE(HasEnvEntry("A=1\0\0"s, ""));
}

TEST_CASE("NewJobMark gives 32 hex digits, a different one each time", "[job_mark]") {
  auto a = NewJobMark();
  auto b = NewJobMark();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->size() == 32);
  CHECK(a->find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(*a != *b);
}

TEST_CASE("KillMarked kills every process whose environment holds the mark, and only those", "[job_mark]") {
  auto mark = NewJobMark();
  REQUIRE(mark.ok());
  std::string entry = fmt::format("{}={}", kJobMarkVar, *mark);
  int marked = StartSleep({"A=1", entry, "B=2"}, false);
  int other = StartSleep({"A=1", entry + "0"}, false);
  REQUIRE(marked > 0);
  REQUIRE(other > 0);
  // The child writes its pid before exec: wait until sleep's environment is there.
  for (int i = 0; i < 500 && !Contains(MarkedProcesses(entry), marked); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::vector<int> found = MarkedProcesses(entry);
  CHECK(found == std::vector<int>{marked});
  CHECK(KillMarked(entry) == 1);
  int status = 0;
  REQUIRE(waitpid(marked, &status, 0) == marked);
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  CHECK(ReadStat(other).ok());  // left alone
  CHECK(MarkedProcesses(entry).empty());
  Reap(other);
}

// The window this closes: a daemon adopted less than a scan before a SIGKILL of
// the launcher was never registered with the watchdog; it must die all the same.
TEST_CASE("After a SIGKILL of the launcher the watchdog kills a marked daemon it was never told of", "[job_mark]") {
  // The fork has the mark in memory; the dlaunch-watch program reads it from
  // its pipe and hands it to its second stage, dlaunch.
  std::string helper = GENERATE(std::string(), std::string(DLAUNCH_WATCH_HELPER));
  INFO("helper: '" << helper << "'");
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t launcher = fork();
  if (launcher == 0) {
    close(fds[0]);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    Watchdog watchdog(helper, DLAUNCH_PROGRAM);
    if (!watchdog.Start("").ok() || watchdog.job_mark().empty() || !watchdog.fallback_note().empty()) _exit(10);
    // As a worker's environment has it; no Scan, no AddProcess.
    int daemon = StartSleep({"PATH=/usr/bin:/bin", fmt::format("{}={}", kJobMarkVar, watchdog.job_mark())}, true);
    if (write(fds[1], &daemon, sizeof daemon) != sizeof daemon) _exit(11);
    pause();
    _exit(12);
  }
  close(fds[1]);
  int daemon = -1;
  REQUIRE(read(fds[0], &daemon, sizeof daemon) == sizeof daemon);
  close(fds[0]);
  REQUIRE(daemon > 0);
  auto s = ReadStat(daemon);
  REQUIRE(s.ok());
  kill(launcher, SIGKILL);
  waitpid(launcher, nullptr, 0);
  bool gone = GoneWithin(daemon, s->start_time, std::chrono::seconds(5));
  if (!gone) kill(daemon, SIGKILL);
  CHECK(gone);
}
