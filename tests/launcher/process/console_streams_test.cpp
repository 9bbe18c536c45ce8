// The console as the streams of workers' output meet it: a full console holds
// the streams back and loses no line.
#include "launcher/process/streams.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "launcher/core/console.hpp"
#include "tests/launcher/core/stalled_pipe.hpp"

using namespace dlaunch::launcher;
using dlaunch::testing::kOverfill;
using dlaunch::testing::Lines;
using dlaunch::testing::StalledPipe;
namespace asio = boost::asio;
using std::chrono::steady_clock;

namespace {

// Each line of `lines` with `tag` before it, as the console shows a tagged stream.
std::string Tagged(const std::string& lines, const std::string& tag) {
  std::string tagged;
  for (size_t at = 0; at < lines.size();) {
    size_t nl = lines.find('\n', at);
    tagged += tag + lines.substr(at, nl + 1 - at);
    at = nl + 1;
  }
  return tagged;
}

// Runs `io` in turns of 10 ms until `done()` holds, 3,000 turns at most.
void RunUntil(asio::io_context& io, const std::function<bool()>& done) {
  for (int i = 0; i < 3000 && !done(); ++i) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

TEST_CASE("streams stop reading a child while the console is full, and lose no line", "[console]") {
  StalledPipe console_pipe;
  asio::io_context io;
  const size_t cap = 64 * 1024;
  Console console(io, console_pipe.fds[1], console_pipe.fds[1], cap);
  int child[2];
  REQUIRE(pipe2(child, O_CLOEXEC) == 0);
  std::string all = Lines(0, 40000, "w");  // about 4 MiB
  // The child: blocking writes, as a worker's.
  std::thread writer([fd = child[1], &all] {
    for (size_t at = 0; at < all.size();) {
      ssize_t n = write(fd, all.data() + at, all.size() - at);
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    close(fd);
  });
  Streams streams(io, console, 16 * 1024);
  bool closed = false;
  StreamRoute route;
  route.console = ConsoleStream::kOut;
  route.prefix = "[0]: ";
  streams.Add(child[0], 0, route, [&] { closed = true; });
  // With nobody reading the console, what dlaunch holds stays bounded.
  size_t most = 0;
  // At least half a second of sampling, and until the console is full (a
  // loaded host is slow to get there), at most 30 s.
  for (int i = 0; i < 3000 && (i < 50 || !console.full()); ++i) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
    most = std::max(most, console.buffered());
  }
  CHECK(console.full());
  CHECK(most < cap + 64 * 1024);
  CHECK(streams.open(0) == 1);

  std::string want = Tagged(all, "[0]: ");
  std::string got = console_pipe.ReadAll(io, want.size());
  writer.join();
  RunUntil(io, [&] { return closed; });
  CHECK(closed);
  CHECK(got.size() == want.size());
  CHECK(got == want);
}

TEST_CASE("streams: time paused on a full console does not count against the drain", "[console]") {
  StalledPipe console_pipe;
  asio::io_context io;
  Console console(io, console_pipe.fds[1], console_pipe.fds[1], 64 * 1024);
  int child[2];
  REQUIRE(pipe2(child, O_CLOEXEC) == 0);
  fcntl(child[1], F_SETFL, O_NONBLOCK);
  // The child wrote about 60 KiB (what its pipe holds) and exited.
  std::string all = Lines(0, 600, "w");
  REQUIRE(write(child[1], all.data(), all.size()) == static_cast<ssize_t>(all.size()));
  close(child[1]);
  // Enough to fill the console first.
  for (int i = 0; i < kOverfill; ++i) console.Write(ConsoleStream::kOut, Lines(i, 1, "x"));
  REQUIRE(console.full());
  Streams streams(io, console, 16 * 1024);
  int closed = 0;
  StreamRoute route;
  route.console = ConsoleStream::kOut;
  streams.Add(child[0], 0, route, [&] { ++closed; });
  streams.Drain(0);
  io.run_for(kDrainTimeout + std::chrono::milliseconds(500));
  CHECK(closed == 0);  // still waiting for the console, not cut off
  std::string got = console_pipe.ReadAll(io, Lines(0, kOverfill, "x").size() + all.size());
  CHECK(closed == 1);
  CHECK(got == Lines(0, kOverfill, "x") + all);
}

TEST_CASE("streams: a child whose output a full console holds back is held, not silent", "[console]") {
  StalledPipe console_pipe;
  asio::io_context io;
  Console console(io, console_pipe.fds[1], console_pipe.fds[1], 64 * 1024);
  for (int i = 0; i < kOverfill; ++i) console.Write(ConsoleStream::kOut, Lines(i, 1, "x"));
  REQUIRE(console.full());
  Streams streams(io, console, 16 * 1024);
  // Three children: `busy` wrote more than one read takes, `done` less, `quiet` nothing.
  struct Child {
    int fds[2] = {-1, -1};
    LastLine last;
  };
  Child busy, done, quiet;
  for (Child* c : {&busy, &done, &quiet}) {
    REQUIRE(pipe2(c->fds, O_CLOEXEC | O_NONBLOCK) == 0);
    StreamRoute route;
    route.console = ConsoleStream::kOut;
    route.last = &c->last;
    streams.Add(c->fds[0], 0, route, [] {});
  }
  std::string lines = Lines(0, 300, "w");  // about 31 KiB: two reads
  REQUIRE(write(busy.fds[1], lines.data(), lines.size()) == static_cast<ssize_t>(lines.size()));
  REQUIRE(write(done.fds[1], lines.data(), 4096) == 4096);
  CHECK_FALSE(streams.held(0));  // nothing read yet
  // Until `busy` is held and `done`'s 4 KiB have been read (then it is paused too).
  RunUntil(io, [&] { return streams.held(0) && done.last.at(); });
  REQUIRE(done.last.at());
  CHECK(streams.held(0));
  CHECK(streams.held(0, &busy.last));
  CHECK_FALSE(streams.held(0, &done.last));  // paused, but its writer wrote nothing since
  CHECK_FALSE(streams.held(0, &quiet.last));
  CHECK_FALSE(streams.held(1));
  REQUIRE(write(done.fds[1], lines.data(), 10) == 10);  // it writes again while the console is full
  CHECK(streams.held(0, &done.last));

  // Once the console drains, everything is read: nothing is held any more.
  console_pipe.ReadAll(io, Lines(0, kOverfill, "x").size() + lines.size() + 4096 + 10);
  RunUntil(io, [&] { return !streams.held(0); });
  CHECK_FALSE(streams.held(0));
  for (Child* c : {&busy, &done, &quiet}) close(c->fds[1]);
  streams.CloseAll();
}

TEST_CASE("streams: a worker's line without a newline is ended when its pipe closes", "[console][streams]") {
  StalledPipe console_pipe;
  asio::io_context io;
  Console console(io, console_pipe.fds[1], console_pipe.fds[1]);
  Streams streams(io, console, 16 * 1024);
  int child[2];
  REQUIRE(pipe2(child, O_CLOEXEC) == 0);
  bool closed = false;
  StreamRoute route;
  route.console = ConsoleStream::kOut;
  route.prefix = "[2]: ";
  streams.Add(child[0], 0, route, [&] { closed = true; });
  REQUIRE(write(child[1], "first\nlast, unterminated", 24) == 24);
  close(child[1]);
  std::string want = "[2]: first\n[2]: last, unterminated\n";
  CHECK(console_pipe.ReadAll(io, want.size()) == want);
  CHECK(closed);
}

TEST_CASE("streams: many short lines a read, a line longer than a read, a stalled reader: bounded, whole, none lost",
          "[console][streams][bounds]") {
  StalledPipe console_pipe;
  asio::io_context io;
  const size_t cap = 64 * 1024;
  Console console(io, console_pipe.fds[1], console_pipe.fds[1], cap);
  int child[2];
  REQUIRE(pipe2(child, O_CLOEXEC) == 0);
  std::string all;
  for (int i = 0; i < 200000; ++i) {
    all += fmt::format("{}\n", i);
    if (i % 50000 == 7) all += std::string(100000, 'L') + "\n";  // six reads long
  }
  std::thread writer([fd = child[1], &all] {
    for (size_t at = 0; at < all.size();) {
      ssize_t n = write(fd, all.data() + at, std::min<size_t>(all.size() - at, 70000));
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    close(fd);
  });
  Streams streams(io, console, 16 * 1024);
  bool closed = false;
  StreamRoute route;
  route.console = ConsoleStream::kOut;
  route.prefix = "[1]: ";
  streams.Add(child[0], 0, route, [&] { closed = true; });
  size_t most = 0;
  for (int i = 0; i < 3000 && (i < 30 || !console.full()); ++i) {  // as above
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
    most = std::max(most, console.buffered());
  }
  CHECK(console.full());
  CHECK(most < cap + 2 * 16 * 1024 * 2);  // the cap and about one tagged read
  std::string want = Tagged(all, "[1]: ");
  std::string got = console_pipe.ReadAll(io, want.size());
  writer.join();
  RunUntil(io, [&] { return closed; });
  CHECK(closed);
  CHECK(got.size() == want.size());
  CHECK(got == want);
}
