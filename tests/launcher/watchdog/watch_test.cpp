#include "launcher/watchdog/watch.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "launcher/process/process.hpp"
#include "tests/launcher/process/process_checks.hpp"

using namespace dlaunch::launcher;
using dlaunch::testing::GoneWithin;

namespace {

// The three processes of a job whose launcher is about to be killed.
struct WatchedJob {
  pid_t launcher = -1;
  pid_t worker = -1;
  pid_t watchdog = -1;
};

// Forks a launcher that starts a Watchdog with `helper` (empty: a fork of
// itself) set to remove `cleanup_dir`, starts `sleep 300` in a process group of
// its own as a worker, registers that group, reports the pids and waits.
WatchedJob StartWatchedJob(const std::string& helper, const std::string& cleanup_dir) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  WatchedJob job;
  job.launcher = fork();
  REQUIRE(job.launcher >= 0);
  if (job.launcher == 0) {
    close(fds[0]);
    Watchdog watchdog(helper);
    if (!watchdog.Start(cleanup_dir).ok()) _exit(10);
    pid_t worker = fork();
    if (worker == 0) {
      setpgid(0, 0);
      execlp("sleep", "sleep", "300", static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(worker, worker);  // either side may run first
    watchdog.Add(worker);
    pid_t pids[2] = {worker, watchdog.pid()};
    if (write(fds[1], pids, sizeof pids) != sizeof pids) _exit(11);
    pause();
    _exit(12);
  }
  close(fds[1]);
  pid_t pids[2] = {-1, -1};
  bool got = read(fds[0], pids, sizeof pids) == sizeof pids;
  close(fds[0]);
  if (!got) {
    kill(job.launcher, SIGKILL);
    waitpid(job.launcher, nullptr, 0);
  }
  REQUIRE(got);
  job.worker = pids[0];
  job.watchdog = pids[1];
  return job;
}

std::string ExeOf(pid_t pid) {
  std::error_code ec;
  return std::filesystem::read_symlink(fmt::format("/proc/{}/exe", pid), ec).string();
}

}  // namespace

TEST_CASE("watch: the helper's arguments carry the orders, and a bad one is named", "[watchdog]") {
  WatchOrders orders{4242, "DLAUNCH_JOB_MARK=ab", "/tmp/run dir", ""};
  dlaunch::Result<WatchOrders> back = ParseWatchArgs(WatchArgs(orders));
  REQUIRE(back.ok());
  CHECK(back->launcher_group == 4242);
  CHECK(back->mark_entry == "DLAUNCH_JOB_MARK=ab");
  CHECK(back->cleanup_dir == "/tmp/run dir");
  CHECK(back->cleanup_file.empty());
  CHECK(ParseWatchArgs({"1", "", ""}).status().message() ==
        "dlaunch-watch: 3 arguments, expected 4 (GROUP MARK DIR FILE; dlaunch starts it)");
  for (std::string group : {"x", "-5", "0", "12x", "", "99999999999999999999"}) {
    INFO(group);
    CHECK(ParseWatchArgs({group, "", "", ""}).status().message() ==
          fmt::format("dlaunch-watch: process group '{}' is not a positive number", group));
  }
}

TEST_CASE("watch: no dlaunch-watch beside the program means the fork", "[watchdog]") {
  // The test binary's folder holds no dlaunch-watch.
  CHECK(Watchdog::WatchHelperPath().empty());
}

TEST_CASE("watch: after a SIGKILL of the launcher its watchdog kills the registered group and removes the run directory",
          "[watchdog]") {
  // Both ways the watchdog starts: the dlaunch-watch program, and a fork of the
  // launcher, also when the program named cannot be executed.
  std::string helper = GENERATE(std::string(DLAUNCH_WATCH_HELPER), std::string(), std::string("/dev/null"));
  INFO("helper: '" << helper << "'");
  char dir_template[] = "/tmp/dlaunch-watch-test-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  std::string dir = dir_template;
  WatchedJob job = StartWatchedJob(helper, dir);
  // The watchdog is the launcher's child, leads a group of its own, and runs the helper when there is one.
  auto watch_stat = ReadStat(job.watchdog);
  REQUIRE(watch_stat.ok());
  CHECK(watch_stat->ppid == job.launcher);
  CHECK(watch_stat->pgid == job.watchdog);
  if (helper == DLAUNCH_WATCH_HELPER) CHECK(ExeOf(job.watchdog) == std::filesystem::canonical(helper).string());
  auto worker_stat = ReadStat(job.worker);
  REQUIRE(worker_stat.ok());
  kill(job.launcher, SIGKILL);
  waitpid(job.launcher, nullptr, 0);
  bool gone = GoneWithin(job.worker, worker_stat->start_time, std::chrono::seconds(5));
  if (!gone) kill(job.worker, SIGKILL);
  CHECK(gone);
  CHECK(GoneWithin(job.watchdog, watch_stat->start_time, std::chrono::seconds(5)));
  CHECK(!std::filesystem::exists(dir));
  std::filesystem::remove_all(dir);
}

TEST_CASE("watch: a stopped watchdog leaves, killing nothing", "[watchdog]") {
  std::string helper = GENERATE(std::string(DLAUNCH_WATCH_HELPER), std::string(), std::string("/dev/null"));
  INFO("helper: '" << helper << "'");
  Watchdog watchdog(helper);
  REQUIRE(watchdog.Start("").ok());
  pid_t worker = fork();
  REQUIRE(worker >= 0);
  if (worker == 0) {
    setpgid(0, 0);
    execlp("sleep", "sleep", "300", static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(worker, worker);
  watchdog.Add(worker);
  int watch = watchdog.pid();
  watchdog.Stop();
  int status = 0;
  REQUIRE(waitpid(watch, &status, 0) == watch);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(kill(worker, 0) == 0);  // still running
  kill(worker, SIGKILL);
  waitpid(worker, nullptr, 0);
}
