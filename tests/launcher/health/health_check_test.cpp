#include "launcher/health/health_check.hpp"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "tests/temp_dir.hpp"

using dlaunch::launcher::AsioTimers;
using dlaunch::launcher::CheckOutcome;
using dlaunch::launcher::HealthCheckSpec;
using dlaunch::launcher::kCheckOutputKeep;
using dlaunch::launcher::LastLine;
using dlaunch::launcher::ProcessHealthChecker;
using dlaunch::testing::TempDir;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

// Gone, or a zombie that no longer runs (its parent, init here, reaps it).
bool Dead(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string all;
  if (!std::getline(stat, all)) return true;
  size_t paren = all.rfind(')');
  return paren != std::string::npos && paren + 2 < all.size() && all[paren + 2] == 'Z';
}

// Runs the loop until `done` holds, for at most `limit`.
template <typename F>
bool RunUntil(boost::asio::io_context& io, F done, milliseconds limit = seconds(10)) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < until) {
    io.restart();
    io.run_for(milliseconds(10));
  }
  return done();
}

struct Check {
  explicit Check(const std::string& command, milliseconds timeout = seconds(10),
                 milliseconds grace = dlaunch::launcher::kCheckKillGrace)
      : checker(io, timers, HealthCheckSpec{command, timeout, grace, {"PATH=/usr/bin:/bin"}}) {}

  CheckOutcome Run() {
    checker.Run([this](CheckOutcome o) { outcome = std::move(o); });
    CHECK_FALSE(outcome);  // never from within Run
    REQUIRE(RunUntil(
        io, [this] { return outcome.has_value(); }, seconds(20)));
    return *outcome;
  }

  boost::asio::io_context io;
  AsioTimers timers{io};
  ProcessHealthChecker checker;
  std::optional<CheckOutcome> outcome;
};

int ReadPid(const std::string& path) {
  std::ifstream in(path);
  int pid = -1;
  in >> pid;
  return pid;
}

}  // namespace

TEST_CASE("a check that exits 0 passes", "[health]") {
  Check c("test -d /");
  CheckOutcome o = c.Run();
  CHECK(o.ok);
  CHECK(o.how == "passed");
  CHECK(c.checker.pid() == -1);
}

TEST_CASE("a check that exits 3 fails, quoting the last line of its output", "[health]") {
  Check c("echo checking /scratch; echo 'no space on /scratch' >&2; echo; exit 3");
  CheckOutcome o = c.Run();
  CHECK_FALSE(o.ok);
  CHECK(o.how == "exited with code 3");
  CHECK(o.last_line == "no space on /scratch");
  CHECK(o.Describe() == "exited with code 3: no space on /scratch");
  CHECK(o.output == "checking /scratch\nno space on /scratch\n\n");
}

TEST_CASE("a check killed by a signal fails, naming it", "[health]") {
  Check c("kill -SEGV $$");
  CheckOutcome o = c.Run();
  CHECK_FALSE(o.ok);
  CHECK(o.how == "was killed by SIGSEGV");
}

TEST_CASE("a check that hangs is killed at its timeout with its whole group, grandchild included", "[health]") {
  TempDir dir;
  std::string file = dir.path + "/grandchild";
  // The background sleep is a second process of the check's group.
  Check c("sleep 100 & echo $! >" + file + "; echo waiting; sleep 100", seconds(1));
  c.checker.Run([&c](CheckOutcome o) { c.outcome = std::move(o); });
  REQUIRE(RunUntil(c.io, [&] { return ReadPid(file) > 0; }));
  int leader = c.checker.pid();
  int grandchild = ReadPid(file);
  REQUIRE(leader > 0);
  CHECK(getpgid(grandchild) == leader);
  REQUIRE(RunUntil(
      c.io, [&] { return c.outcome.has_value(); }, seconds(20)));
  CheckOutcome o = *c.outcome;
  CHECK_FALSE(o.ok);
  CHECK(o.how == "did not finish within 1s; killed");
  CHECK(o.Describe() == "did not finish within 1s; killed: waiting");
  CHECK(o.took >= seconds(1));
  CHECK(RunUntil(
      c.io, [&] { return Dead(leader) && Dead(grandchild); }, seconds(5)));
}

TEST_CASE("a check that ignores SIGTERM gets SIGKILL after the grace", "[health]") {
  Check c("trap '' TERM; sleep 100", seconds(1), milliseconds(200));
  c.checker.Run([&c](CheckOutcome o) { c.outcome = std::move(o); });
  REQUIRE(RunUntil(c.io, [&] { return c.checker.pid() > 0; }));
  int leader = c.checker.pid();
  REQUIRE(RunUntil(
      c.io, [&] { return c.outcome.has_value(); }, seconds(20)));
  CHECK(c.outcome->how == "did not finish within 1s; killed");
  CHECK(RunUntil(
      c.io, [&] { return Dead(leader); }, seconds(5)));
}

TEST_CASE("a check that closes its output early is judged by its exit, not by the pipe", "[health]") {
  Check pass("exec >&- 2>&-; sleep 0.3; exit 0");
  CHECK(pass.Run().ok);
  Check fail("echo before; exec >&- 2>&-; sleep 0.3; exit 5");
  CheckOutcome o = fail.Run();
  CHECK_FALSE(o.ok);
  CHECK(o.Describe() == "exited with code 5: before");
}

TEST_CASE("a check that leaves a process holding its pipe ends with its own exit", "[health]") {
  TempDir dir;
  std::string file = dir.path + "/left";
  Check c("sleep 100 & echo $! >" + file + "; echo ok; exit 0");
  CheckOutcome o = c.Run();
  CHECK(o.ok);
  int left = ReadPid(file);
  REQUIRE(left > 0);
  // What it left in its group goes with it.
  CHECK(RunUntil(
      c.io, [&] { return Dead(left); }, seconds(5)));
}

TEST_CASE("a command that does not exist fails with the shell's line", "[health]") {
  Check c("no-such-health-command-xyz --flag");
  CheckOutcome o = c.Run();
  CHECK_FALSE(o.ok);
  CHECK(o.how == "exited with code 127");
  CHECK(o.last_line.find("no-such-health-command-xyz") != std::string::npos);
  CHECK(o.last_line.find("not found") != std::string::npos);
}

TEST_CASE("a check's output is kept to its last few KiB", "[health]") {
  Check c("head -c 100000 /dev/zero | tr '\\0' x; echo; echo 'the last line'; exit 1");
  CheckOutcome o = c.Run();
  CHECK(o.output.size() == kCheckOutputKeep);
  CHECK(o.last_line == "the last line");
}

TEST_CASE("a cancelled check's group is killed and its answer never comes", "[health]") {
  Check c("sleep 100");
  bool answered = false;
  c.checker.Run([&](CheckOutcome) { answered = true; });
  REQUIRE(RunUntil(c.io, [&] { return c.checker.pid() > 0; }));
  int leader = c.checker.pid();
  c.checker.Cancel();
  CHECK(c.checker.pid() == -1);
  CHECK(RunUntil(
      c.io, [&] { return Dead(leader); }, seconds(5)));
  CHECK_FALSE(answered);
}

TEST_CASE("the last line is the last one that is not blank, printable and bounded", "[health]") {
  CHECK(LastLine("") == "");
  CHECK(LastLine("\n \n\t\n") == "");
  CHECK(LastLine("a\nb\n\n  \n") == "b");
  CHECK(LastLine("only") == "only");
  CHECK(LastLine("x\r\n") == "x");
  CHECK(LastLine("bad \x1b[31mred\n") == "bad \\x1b[31mred");
  std::string long_line(1000, 'y');
  CHECK(LastLine(long_line).size() < 300);
}
