#include "launcher/watchdog/watch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "launcher/process/process.hpp"
#include "launcher/process/watch_helper.hpp"
#include "tests/launcher/process/process_checks.hpp"
#include "tests/temp_dir.hpp"

using namespace dlaunch::launcher;
using dlaunch::testing::GoneWithin;
using dlaunch::testing::ReadFile;

namespace {

// `sleep 300` in a process group of its own, this process's child.
pid_t StartSleeper() {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    execlp("sleep", "sleep", "300", static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);  // either side may run first
  return pid;
}

// The three processes of a job whose launcher is about to be killed.
struct WatchedJob {
  pid_t launcher = -1;
  pid_t worker = -1;
  pid_t watchdog = -1;
  bool noted = false;  // the launcher has a fallback note (the helper is not its watchdog)
};

// Forks a launcher that closes the descriptors `closed` (as a launcher started
// with them closed would have them), starts a Watchdog with `helper` (empty: a
// fork of itself) and `second_stage` set to remove `cleanup_dir`, starts
// `sleep 300` in a process group of its own as a worker, registers that group,
// reports the pids and waits.
WatchedJob StartWatchedJob(const std::string& helper, const std::string& cleanup_dir,
                           const std::vector<int>& closed = {}, const std::string& second_stage = DLAUNCH_PROGRAM) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  int report = fcntl(fds[1], F_DUPFD_CLOEXEC, 10);  // above 2: the launcher may close those
  REQUIRE(report >= 10);
  close(fds[1]);
  WatchedJob job;
  job.launcher = fork();
  REQUIRE(job.launcher >= 0);
  if (job.launcher == 0) {
    close(fds[0]);
    for (int fd : closed) close(fd);
    Watchdog watchdog(helper, second_stage);
    if (!watchdog.Start(cleanup_dir).ok()) _exit(10);
    pid_t worker = StartSleeper();
    watchdog.Add(worker);
    pid_t pids[3] = {worker, watchdog.pid(), watchdog.fallback_note().empty() ? 0 : 1};
    if (write(report, pids, sizeof pids) != sizeof pids) _exit(11);
    pause();
    _exit(12);
  }
  close(report);
  pid_t pids[3] = {-1, -1, -1};
  bool got = read(fds[0], pids, sizeof pids) == sizeof pids;
  close(fds[0]);
  if (!got) {
    kill(job.launcher, SIGKILL);
    waitpid(job.launcher, nullptr, 0);
  }
  REQUIRE(got);
  job.worker = pids[0];
  job.watchdog = pids[1];
  job.noted = pids[2] != 0;
  return job;
}

// A program in the helper's place: a script in a fresh directory (removed by
// the destructor) with `body` after its #! line.
struct ForeignHelper {
  std::string dir;
  std::string path;
  explicit ForeignHelper(const std::string& body) {
    char dir_template[] = "/tmp/dlaunch-foreign-helper-XXXXXX";
    REQUIRE(mkdtemp(dir_template) != nullptr);
    dir = dir_template;
    path = dir + "/dlaunch-watch";
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }
  ~ForeignHelper() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

std::string ExeOf(pid_t pid) {
  std::error_code ec;
  return std::filesystem::read_symlink(fmt::format("/proc/{}/exe", pid), ec).string();
}

}  // namespace

TEST_CASE("watch: the helper's arguments carry the group and paths, and a bad one is named", "[watchdog]") {
  WatchOrders orders{4242, "DLAUNCH_JOB_MARK=ab", "/tmp/run dir", ""};
  std::vector<std::string> args = WatchArgs(orders);
  // The mark is not among them: any user reads a program's arguments.
  for (const std::string& a : args) CHECK(a.find("ab") == std::string::npos);
  dlaunch::Result<WatchOrders> back = ParseWatchArgs(args);
  REQUIRE(back.ok());
  CHECK(back->launcher_group == 4242);
  CHECK(back->mark_entry.empty());
  CHECK(back->cleanup_dir == "/tmp/run dir");
  CHECK(back->cleanup_file.empty());
  CHECK(ParseWatchArgs({"1", "", "", ""}).status().message() ==
        "dlaunch-watch: 4 arguments, expected 3 (GROUP DIR FILE; dlaunch starts it)");
  for (std::string group : {"x", "-5", "0", "12x", "", "99999999999999999999"}) {
    INFO(group);
    CHECK(ParseWatchArgs({group, "", ""}).status().message() ==
          fmt::format("dlaunch-watch: process group '{}' is not a positive number", group));
  }
}

TEST_CASE("watch: the job mark travels on the orders pipe, and a bad record is named", "[watchdog]") {
  auto read_back = [](const std::string& bytes) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    REQUIRE(write(fds[1], bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    close(fds[1]);
    dlaunch::Result<WatchRecord> record = ReadWatchMark(fds[0]);
    close(fds[0]);
    return record.ok() ? "challenge " + record->challenge + " mark " + record->mark_entry : record.status().message();
  };
  std::string entry = "DLAUNCH_JOB_MARK=0123456789abcdef0123456789abcdef";
  std::string challenge(kWatchChallengeSize, 'c');
  CHECK(read_back(WatchMarkRecord({challenge, entry})) == "challenge " + challenge + " mark " + entry);
  CHECK(read_back(WatchMarkRecord({challenge, ""})) == "challenge " + challenge + " mark ");
  // The orders that follow are left on the pipe.
  CHECK(read_back(WatchMarkRecord({challenge, entry}) + "rest") == "challenge " + challenge + " mark " + entry);
  CHECK(read_back("") == "dlaunch-watch: orders on stdin: no job mark (end of input)");
  CHECK(read_back(WatchMarkRecord({challenge, entry}).substr(0, 10)) ==
        "dlaunch-watch: orders on stdin: the job mark cut short (end of input)");
  CHECK(read_back(WatchMarkRecord({challenge, std::string(kMaxMarkEntry + 1, 'x')})) ==
        fmt::format("dlaunch-watch: orders on stdin: a record of {} bytes ({} to {}; dlaunch starts it)",
                    kWatchChallengeSize + kMaxMarkEntry + 1, kWatchChallengeSize, kWatchChallengeSize + kMaxMarkEntry));
  CHECK(read_back(WatchMarkRecord({"short", ""})) ==
        fmt::format("dlaunch-watch: orders on stdin: a record of 5 bytes ({} to {}; dlaunch starts it)",
                    kWatchChallengeSize, kWatchChallengeSize + kMaxMarkEntry));
  // A closed stdin (a helper started by hand with <&-).
  CHECK(ReadWatchMark(987).status().message() == "dlaunch-watch: orders on stdin: no job mark (Bad file descriptor)");
}

TEST_CASE("watch: the helper's command line does not hold the job mark", "[watchdog]") {
  Watchdog watchdog(DLAUNCH_WATCH_HELPER, DLAUNCH_PROGRAM);
  REQUIRE(watchdog.Start("").ok());
  CHECK(watchdog.fallback_note().empty());
  REQUIRE(!watchdog.job_mark().empty());
  std::string cmdline = ReadFile(fmt::format("/proc/{}/cmdline", watchdog.pid()));
  CHECK(cmdline.find(std::string(DLAUNCH_WATCH_HELPER)) == 0);  // it is the helper's, read
  CHECK(cmdline.find(watchdog.job_mark()) == std::string::npos);
  // Nor its environment (the launcher's, which holds no mark).
  CHECK(ReadFile(fmt::format("/proc/{}/environ", watchdog.pid())).find(watchdog.job_mark()) == std::string::npos);
  int watch = watchdog.pid();
  watchdog.Stop();
  waitpid(watch, nullptr, 0);
}

TEST_CASE("watch: a helper that does not say it watches is named, killed and reaped", "[watchdog]") {
  struct Case {
    std::string body;
    std::string what;  // the message after "PATH: "
  };
  const std::string pid_file = "echo $$ > \"$(dirname \"$0\")/pid\"; ";
  std::vector<Case> cases = {
      {pid_file + "exit 0", "ended before it was watching (exit status 0)"},
      // A stale dlaunch-watch's complaint, quoted on one line with its control bytes escaped.
      {pid_file + "printf 'dlaunch-watch: 3 arguments, expected 4\\033[2J\\n' >&2; exit 2",
       "ended before it was watching (exit status 2: dlaunch-watch: 3 arguments, expected 4\\x1b[2J)"},
      // Closes its output and runs on: killed all the same.
      {pid_file + "exec sleep 300 >/dev/null 2>&1", "ended before it was watching (killed by SIGKILL)"},
      // Never answers.
      {pid_file + "exec sleep 300", "no answer within 300 ms, so it was killed"},
      // Answers something else.
      {pid_file + "echo hello; exec sleep 300", "no answer within 300 ms (it wrote: hello), so it was killed"},
      // Starts with the ack's letter, but never read the challenge.
      {pid_file + "echo 'Warning: x'; exit 0", "ended before it was watching (exit status 0: Warning: x)"},
      {pid_file + "printf W; exec sleep 300", "no answer within 300 ms (it wrote: W), so it was killed"},
  };
  for (const Case& c : cases) {
    INFO(c.body);
    ForeignHelper foreign(c.body);
    dlaunch::Result<WatchHelper> started =
        StartWatchHelper(foreign.path, WatchOrders{getpgrp(), "DLAUNCH_JOB_MARK=x", "", ""}, DLAUNCH_PROGRAM,
                         std::chrono::milliseconds(300));
    REQUIRE_FALSE(started.ok());
    CHECK(started.status().message() == foreign.path + ": " + c.what);
    // It was reaped: its pid names no process, not even a zombie.
    std::string pid = ReadFile(foreign.dir + "/pid");
    REQUIRE(!pid.empty());
    CHECK(kill(std::stoi(pid), 0) == -1);
  }
  dlaunch::Result<WatchHelper> missing =
      StartWatchHelper("/nonexistent-dlaunch-test/dlaunch-watch", WatchOrders{getpgrp(), "", "", ""}, DLAUNCH_PROGRAM);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() ==
        "/nonexistent-dlaunch-test/dlaunch-watch: cannot start (No such file or directory)");
}

TEST_CASE("watch: a foreign helper leaves the fork as the watchdog, with one note naming it", "[watchdog]") {
  ForeignHelper foreign("exit 0");
  Watchdog watchdog(foreign.path, DLAUNCH_PROGRAM);
  REQUIRE(watchdog.Start("").ok());
  CHECK(watchdog.fallback_note() ==
        foreign.path + ": ended before it was watching (exit status 0); the watchdog is a fork of dlaunch instead");
  CHECK(ExeOf(watchdog.pid()) == ExeOf(getpid()));
  int watch = watchdog.pid();
  watchdog.Stop();
  int status = 0;
  REQUIRE(waitpid(watch, &status, 0) == watch);
  CHECK(WIFEXITED(status));
}

TEST_CASE("watch: no dlaunch-watch beside the program means the fork", "[watchdog]") {
  // The test binary's folder holds no dlaunch-watch.
  CHECK(Watchdog::WatchHelperPath().empty());
}

TEST_CASE(
    "watch: after a SIGKILL of the launcher its watchdog kills the registered group and removes the run directory",
    "[watchdog]") {
  // Both ways the watchdog starts: the dlaunch-watch program, and a fork of the
  // launcher, also when the program named cannot be executed or, in the
  // helper's place, exits at once (made for each run: Catch2 keeps the
  // generated values across runs).
  ForeignHelper foreign("exit 0");
  std::string helper =
      GENERATE(std::string(DLAUNCH_WATCH_HELPER), std::string(), std::string("/dev/null"), std::string("foreign"));
  if (helper == "foreign") helper = foreign.path;
  // A launcher started with stdin, stdout or stderr closed: the orders pipe may
  // land on 0-2, and must be the helper's stdin all the same.
  std::vector<int> closed =
      GENERATE(std::vector<int>{}, std::vector<int>{0}, std::vector<int>{1}, std::vector<int>{0, 1, 2});
  INFO("helper: '" << helper << "', closed: " << closed.size() << " of 0-2, the first "
                   << (closed.empty() ? -1 : closed[0]));
  char dir_template[] = "/tmp/dlaunch-watch-test-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  std::string dir = dir_template;
  WatchedJob job = StartWatchedJob(helper, dir, closed);
  // Only the real helper is the watchdog; each other way is the fork, and noted
  // (but when there was no helper at all).
  CHECK(job.noted == (helper != DLAUNCH_WATCH_HELPER && !helper.empty()));
  // The watchdog is the launcher's child, leads a group of its own, and runs the helper when there is one.
  auto watch_stat = ReadStat(job.watchdog);
  REQUIRE(watch_stat.ok());
  CHECK(watch_stat->ppid == job.launcher);
  CHECK(watch_stat->pgid == job.watchdog);
  if (helper == DLAUNCH_WATCH_HELPER) CHECK(ExeOf(job.watchdog) == std::filesystem::canonical(helper).string());
  auto worker_stat = ReadStat(job.worker);
  REQUIRE(worker_stat.ok());
  // While the launcher lives both run: a watchdog that read EOF at once (its
  // orders pipe lost to a dup2 onto a closed 0-2) has killed the worker and
  // left, and neither is reaped by the launcher, which waits in pause().
  CHECK(worker_stat->state != 'Z');
  CHECK(watch_stat->state != 'Z');
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
  Watchdog watchdog(helper, DLAUNCH_PROGRAM);
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

namespace {

// Runs `program` as `argv` (argv[0] as given) with `input` on stdin; returns
// its exit status and what it wrote on stderr.
std::pair<int, std::string> RunWith(const std::string& program, const std::vector<std::string>& argv,
                                    const std::string& input) {
  int in[2], err[2];
  REQUIRE(pipe(in) == 0);
  REQUIRE(pipe(err) == 0);
  REQUIRE(write(in[1], input.data(), input.size()) == static_cast<ssize_t>(input.size()));
  close(in[1]);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(err[1], 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(program.c_str(), args.data());
    _exit(127);
  }
  close(in[0]);
  close(err[1]);
  std::string said;
  char buf[512];
  for (ssize_t n; (n = read(err[0], buf, sizeof buf)) > 0;) said.append(buf, static_cast<size_t>(n));
  close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), said};
}

}  // namespace

TEST_CASE("watch: the first stage hands what is still registered to the second, which kills it", "[watchdog]") {
  char dir_template[] = "/tmp/dlaunch-watch-test-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  std::string dir = dir_template;
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t launcher = fork();
  REQUIRE(launcher >= 0);
  if (launcher == 0) {
    close(fds[0]);
    Watchdog watchdog(DLAUNCH_WATCH_HELPER, DLAUNCH_PROGRAM);
    if (!watchdog.Start(dir).ok() || !watchdog.fallback_note().empty()) _exit(10);
    // A group registered, one registered and then removed, and a process
    // registered alone (its group never was), as an adopted daemon is.
    pid_t kept = StartSleeper(), removed = StartSleeper(), alone = StartSleeper();
    auto alone_stat = ReadStat(alone);
    if (!alone_stat.ok()) _exit(11);
    watchdog.Add(kept);
    watchdog.Add(removed);
    watchdog.Remove(removed);
    watchdog.AddProcess(alone, alone_stat->start_time);
    pid_t pids[3] = {kept, removed, alone};
    if (write(fds[1], pids, sizeof pids) != sizeof pids) _exit(12);
    pause();
    _exit(13);
  }
  close(fds[1]);
  pid_t pids[3] = {-1, -1, -1};
  bool got = read(fds[0], pids, sizeof pids) == sizeof pids;
  close(fds[0]);
  if (!got) kill(launcher, SIGKILL);
  REQUIRE(got);
  std::vector<uint64_t> starts;
  for (pid_t p : pids) {
    auto stat = ReadStat(p);
    REQUIRE(stat.ok());
    starts.push_back(stat->start_time);
  }
  kill(launcher, SIGKILL);
  waitpid(launcher, nullptr, 0);
  CHECK(GoneWithin(pids[0], starts[0], std::chrono::seconds(5)));
  CHECK(GoneWithin(pids[2], starts[2], std::chrono::seconds(5)));
  // The second stage removed the run directory, which only it does.
  for (int i = 0; i < 500 && std::filesystem::exists(dir); ++i) usleep(10'000);
  CHECK(!std::filesystem::exists(dir));
  auto removed = ReadStat(pids[1]);
  REQUIRE(removed.ok());
  CHECK(removed->start_time == starts[1]);  // still running
  for (pid_t p : pids) kill(p, SIGKILL);
  std::filesystem::remove_all(dir);
}

TEST_CASE("watch: a second stage the helper cannot open leaves the fork, with one note naming it", "[watchdog]") {
  Watchdog watchdog(DLAUNCH_WATCH_HELPER, "/nonexistent-dlaunch-test/dlaunch");
  REQUIRE(watchdog.Start("").ok());
  CHECK(watchdog.fallback_note() ==
        fmt::format("{}: ended before it was watching (exit status 2: dlaunch-watch: cannot open the second stage "
                    "/nonexistent-dlaunch-test/dlaunch); the watchdog is a fork of dlaunch instead",
                    DLAUNCH_WATCH_HELPER));
  CHECK(ExeOf(watchdog.pid()) == ExeOf(getpid()));
  int watch = watchdog.pid();
  watchdog.Stop();
  REQUIRE(waitpid(watch, nullptr, 0) == watch);
}

TEST_CASE("watch: a second stage that cannot run at the end leaves the first to kill the groups itself", "[watchdog]") {
  // /dev/null opens, so the helper answers, but no exec takes it.
  char dir_template[] = "/tmp/dlaunch-watch-test-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  std::string dir = dir_template;
  WatchedJob job = StartWatchedJob(DLAUNCH_WATCH_HELPER, dir, {}, "/dev/null");
  CHECK_FALSE(job.noted);
  auto worker_stat = ReadStat(job.worker);
  REQUIRE(worker_stat.ok());
  kill(job.launcher, SIGKILL);
  waitpid(job.launcher, nullptr, 0);
  bool gone = GoneWithin(job.worker, worker_stat->start_time, std::chrono::seconds(5));
  if (!gone) kill(job.worker, SIGKILL);
  CHECK(gone);
  CHECK(std::filesystem::exists(dir));  // what only the second stage does is left undone
  std::filesystem::remove_all(dir);
}

TEST_CASE("watch: either stage refuses bad arguments and records in one line, with exit 2", "[watchdog]") {
  std::string entry = "DLAUNCH_JOB_MARK=0123456789abcdef0123456789abcdef";
  std::string good = WatchMarkRecord({std::string(kWatchChallengeSize, 'c'), entry});
  struct Case {
    std::string program;
    std::vector<std::string> argv;
    std::string input;
    std::string said;
  };
  const std::string helper = DLAUNCH_WATCH_HELPER;
  std::vector<Case> cases = {
      {helper,
       {"dlaunch-watch", "1", "", ""},
       good,
       "dlaunch-watch: expected 4 arguments (GROUP DIR FILE PROGRAM; dlaunch starts it)\n"},
      {helper, {"dlaunch-watch", "1", "", "", DLAUNCH_PROGRAM}, "", "dlaunch-watch: orders on stdin: no job mark\n"},
      {helper,
       {"dlaunch-watch", "1", "", "", DLAUNCH_PROGRAM},
       WatchMarkRecord({"short", ""}),
       "dlaunch-watch: orders on stdin: a record of the wrong size (dlaunch starts it)\n"},
      {helper,
       {"dlaunch-watch", "1", "", "", DLAUNCH_PROGRAM},
       WatchMarkRecord({std::string(kWatchChallengeSize, 'c'), std::string(kMaxMarkEntry + 1, 'x')}),
       "dlaunch-watch: orders on stdin: a record of the wrong size (dlaunch starts it)\n"},
      {helper,
       {"dlaunch-watch", "1", "", "", DLAUNCH_PROGRAM},
       good.substr(0, 10),
       "dlaunch-watch: orders on stdin: the job mark cut short\n"},
      // dlaunch as the second stage: the same arguments and record RunWatch takes.
      {DLAUNCH_PROGRAM,
       {"dlaunch-watch", "x", "", ""},
       good,
       "dlaunch-watch: process group 'x' is not a positive number\n"},
      {DLAUNCH_PROGRAM,
       {"dlaunch-watch", "1", "", ""},
       "",
       "dlaunch-watch: orders on stdin: no job mark (end of input)\n"},
  };
  for (const Case& c : cases) {
    INFO(c.program << " with " << c.argv.size() << " arguments and " << c.input.size() << " bytes on stdin");
    auto [code, said] = RunWith(c.program, c.argv, c.input);
    CHECK(code == 2);
    CHECK(said == c.said);
  }
}
