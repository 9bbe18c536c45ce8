// Untagged worker output moved by splice(2) (Streams::Round, Console::Splice):
// the same guarantees as the copying path, checked where splicing differs
// from it: whole lines beside other writers, nothing lost behind a stalled or
// vanished reader, the partial last line, and what the tail and `dlaunch
// status` see.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "launcher/core/console.hpp"
#include "launcher/core/output.hpp"
#include "launcher/process/streams.hpp"

namespace dlaunch::launcher {
namespace {

namespace asio = boost::asio;
using std::chrono::steady_clock;

constexpr size_t kSpliceRead = 256 * 1024;  // the runner's read size

// A console pipe whose reader the test drives.
struct ReaderPipe {
  ReaderPipe() {
    signal(SIGPIPE, SIG_IGN);
    REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
  }
  ~ReaderPipe() {
    for (int fd : fds)
      if (fd >= 0) close(fd);
  }
  // Takes at most `most` bytes of what the pipe holds now.
  size_t Take(std::string& into, size_t most = SIZE_MAX) {
    char buf[65536];
    size_t took = 0;
    while (took < most) {
      ssize_t n = read(fds[0], buf, std::min(sizeof buf, most - took));
      if (n <= 0) break;
      into.append(buf, static_cast<size_t>(n));
      took += static_cast<size_t>(n);
    }
    return took;
  }
  int fds[2] = {-1, -1};
};

// A worker: blocking writes of `text` in pieces of `piece`, then close.
std::thread Writer(int fd, const std::string& text, size_t piece) {
  return std::thread([fd, &text, piece] {
    for (size_t at = 0; at < text.size();) {
      ssize_t n = write(fd, text.data() + at, std::min(piece, text.size() - at));
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    close(fd);
  });
}

// Lines of 1 to 300 bytes, a few of 20 KB (longer than what a round sees of a
// chunk), and a last line without its newline.
std::string MixedLines(size_t bytes, unsigned seed, const std::string& mark) {
  std::mt19937 rng(seed);
  std::string all;
  for (int i = 0; all.size() < bytes; ++i) {
    size_t len = i % 997 == 500 ? 20000 : rng() % 300;
    std::string line = fmt::format("{} {} ", mark, i);
    line.append(len, static_cast<char>('a' + i % 26));
    all += line + "\n";
  }
  return all + mark + " the end, without a newline";
}

void RunFor(asio::io_context& io, std::chrono::milliseconds d) {
  io.restart();
  io.run_for(d);
}

TEST_CASE("spliced output: one untagged worker behind a slow reader loses nothing and adds nothing",
          "[streams][splice][bounds]") {
  ReaderPipe out, err;
  asio::io_context io;
  const size_t cap = 256 * 1024;
  Console console(io, out.fds[1], err.fds[1], cap);
  int child[2];
  REQUIRE(pipe2(child, O_CLOEXEC) == 0);
  fcntl(child[0], F_SETPIPE_SZ, 1 << 20);
  std::string all = MixedLines(12 << 20, 1, "w");
  std::thread writer = Writer(child[1], all, 128 * 1024);
  Streams streams(io, console, kSpliceRead);
  TailBuffer tail;
  LastLine last;
  StreamRoute route;
  route.console = ConsoleStream::kOut;
  route.tail = &tail;
  route.last = &last;
  bool closed = false;
  streams.Add(child[0], 0, route, [&] { closed = true; });

  // A stalled reader: what dlaunch holds stays within the cap and one read.
  size_t most = 0;
  for (int i = 0; i < 20; ++i) {
    RunFor(io, std::chrono::milliseconds(10));
    most = std::max(most, console.buffered());
  }
  CHECK(most <= cap + kSpliceRead);
  CHECK(streams.open(0) == 1);
  // Then a slow one: 64 KiB a turn.
  std::string got;
  auto deadline = steady_clock::now() + std::chrono::seconds(60);
  while ((!closed || console.buffered() > 0) && steady_clock::now() < deadline) {
    out.Take(got, 64 * 1024);
    RunFor(io, std::chrono::milliseconds(1));
  }
  writer.join();
  RunFor(io, std::chrono::milliseconds(10));
  out.Take(got);
  REQUIRE(closed);
  CHECK(got.size() == all.size());
  CHECK(got == all);  // the last line too, as written: without a newline
  // Most of it moved without a copy, and what was seen is what a copy would have seen.
  CHECK(streams.spliced() > all.size() / 2);
  CHECK(last.line() == "w the end, without a newline");
  std::vector<std::string> lines = tail.LastLines(1);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "w the end, without a newline");
}

TEST_CASE("spliced output: whole lines beside another worker and dlaunch's own lines on one pipe",
          "[streams][splice]") {
  // true: beside another untagged worker, both splice; false: beside a tagged
  // worker, which copies, so this one copies whenever lines are queued.
  const bool both_splice = GENERATE(true, false);
  const std::string prefix_b = both_splice ? "" : "[b]: ";
  ReaderPipe pipe;
  asio::io_context io;
  Console console(io, pipe.fds[1], pipe.fds[1], 128 * 1024);  // stdout and stderr one pipe: one queue
  int a[2], b[2];
  REQUIRE(pipe2(a, O_CLOEXEC) == 0);
  REQUIRE(pipe2(b, O_CLOEXEC) == 0);
  fcntl(a[0], F_SETPIPE_SZ, 1 << 20);
  std::string text_a = MixedLines(6 << 20, 2, "A");
  std::string text_b = MixedLines(1 << 20, 3, "B");
  std::thread wa = Writer(a[1], text_a, 200 * 1024);
  std::thread wb = Writer(b[1], text_b, 3000);
  Streams streams(io, console, kSpliceRead);
  int closed = 0;
  StreamRoute untagged;
  untagged.console = ConsoleStream::kOut;
  StreamRoute tagged;
  tagged.console = ConsoleStream::kErr;
  tagged.prefix = prefix_b;
  streams.Add(a[0], 0, untagged, [&] { ++closed; });
  streams.Add(b[0], 0, tagged, [&] { ++closed; });
  std::string got;
  int said = 0;
  auto deadline = steady_clock::now() + std::chrono::seconds(60);
  while ((closed < 2 || console.buffered() > 0) && steady_clock::now() < deadline) {
    pipe.Take(got, 48 * 1024);
    if (said < 200) console.Say(fmt::format("line {} of dlaunch's own", said++));
    RunFor(io, std::chrono::milliseconds(1));
  }
  wa.join();
  wb.join();
  RunFor(io, std::chrono::milliseconds(10));
  pipe.Take(got);
  REQUIRE(closed == 2);
  if (both_splice) CHECK(streams.spliced() > (text_a.size() + text_b.size()) / 2);
  // An untagged writer's last line arrives as written, without a newline, and
  // whatever comes next follows it (dlaunch's own line after a newline of its own).
  auto take_last = [&](const std::string& last) {
    size_t at = got.find(last);
    REQUIRE(at != std::string::npos);
    got.erase(at, last.size());
    if (at < got.size() && got.compare(at, 10, "\ndlaunch: ") == 0) got.erase(at, 1);
  };
  take_last("A the end, without a newline");
  if (both_splice) take_last("B the end, without a newline");
  // Every line is one writer's whole line, and each writer's lines keep their order.
  std::string seen_a, seen_b;
  int own = 0;
  for (size_t at = 0; at < got.size();) {
    size_t nl = got.find('\n', at);
    REQUIRE(nl != std::string::npos);
    std::string line = got.substr(at, nl + 1 - at);
    at = nl + 1;
    if (line.rfind("A ", 0) == 0) {
      seen_a += line;
    } else if (line.rfind(prefix_b + "B ", 0) == 0) {
      seen_b += line.substr(prefix_b.size());
    } else {
      INFO(line.substr(0, 120));
      REQUIRE(line == fmt::format("dlaunch: line {} of dlaunch's own\n", own));
      ++own;
    }
  }
  CHECK(seen_a + "A the end, without a newline" == text_a);
  CHECK((both_splice ? seen_b + "B the end, without a newline" : seen_b) == (both_splice ? text_b : text_b + "\n"));
  CHECK(own == said);
}

TEST_CASE("spliced output: a reader that goes away mid-job neither blocks the worker nor kills dlaunch",
          "[streams][splice]") {
  ReaderPipe out, err;
  asio::io_context io;
  Console console(io, out.fds[1], err.fds[1], 64 * 1024);
  int child[2];
  REQUIRE(pipe2(child, O_CLOEXEC) == 0);
  std::string all = MixedLines(8 << 20, 4, "g");
  std::thread writer = Writer(child[1], all, 128 * 1024);
  Streams streams(io, console, kSpliceRead);
  bool closed = false;
  StreamRoute route;
  route.console = ConsoleStream::kOut;
  streams.Add(child[0], 0, route, [&] { closed = true; });
  std::string got;
  for (int i = 0; i < 20; ++i) {
    out.Take(got, 100 * 1024);
    RunFor(io, std::chrono::milliseconds(5));
  }
  close(out.fds[0]);  // the reader is gone (`| head`)
  out.fds[0] = -1;
  auto deadline = steady_clock::now() + std::chrono::seconds(30);
  while (!closed && steady_clock::now() < deadline) RunFor(io, std::chrono::milliseconds(5));
  writer.join();  // the worker wrote everything: nothing held it
  CHECK(closed);
  CHECK(console.buffered() == 0);
  CHECK(got.size() < all.size());
  CHECK(all.compare(0, got.size(), got) == 0);
}

TEST_CASE("spliced output: closing streams while the reader stalls keeps what was owed, in order",
          "[streams][splice][bounds]") {
  ReaderPipe out, err;
  asio::io_context io;
  Console console(io, out.fds[1], err.fds[1], 4 << 20);
  int child[2];
  REQUIRE(pipe2(child, O_CLOEXEC) == 0);
  fcntl(child[0], F_SETPIPE_SZ, 1 << 20);
  std::string all = MixedLines(3 << 20, 5, "c");
  std::thread writer = Writer(child[1], all, 256 * 1024);
  auto streams = std::make_unique<Streams>(io, console, kSpliceRead);
  StreamRoute route;
  route.console = ConsoleStream::kOut;
  streams->Add(child[0], 0, route, nullptr);
  for (int i = 0; i < 30; ++i) RunFor(io, std::chrono::milliseconds(5));
  REQUIRE(console.buffered() > 0);  // the stalled pipe owes spliced lines
  streams->CloseAll();              // as at the end of a job stopped by a signal
  std::string got;
  auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (console.buffered() > 0 && steady_clock::now() < deadline) {
    out.Take(got);
    RunFor(io, std::chrono::milliseconds(2));
  }
  out.Take(got);
  streams.reset();  // its descriptor closed: the worker's next write fails with EPIPE
  writer.join();
  REQUIRE(!got.empty());
  // What the worker wrote, in order, up to where the streams closed: whole
  // lines, then at most the partial line that waited in the pipe, as it was.
  CHECK(all.compare(0, got.size(), got) == 0);
}

TEST_CASE("spliced output: after a stop signal a stalled reader no longer holds the worker", "[streams][splice]") {
  ReaderPipe out, err;
  asio::io_context io;
  Console console(io, out.fds[1], err.fds[1], 64 * 1024);
  int child[2];
  REQUIRE(pipe2(child, O_CLOEXEC) == 0);
  fcntl(child[0], F_SETPIPE_SZ, 1 << 20);
  std::string all = MixedLines(16 << 20, 6, "s");
  std::thread writer = Writer(child[1], all, 256 * 1024);
  Streams streams(io, console, kSpliceRead);
  bool closed = false;
  StreamRoute route;
  route.console = ConsoleStream::kOut;
  streams.Add(child[0], 0, route, [&] { closed = true; });
  for (int i = 0; i < 30; ++i) RunFor(io, std::chrono::milliseconds(5));
  REQUIRE_FALSE(closed);  // held: the reader takes nothing
  console.NoteStop();
  auto deadline = steady_clock::now() + std::chrono::seconds(20);
  while (!closed && steady_clock::now() < deadline) RunFor(io, std::chrono::milliseconds(5));
  writer.join();
  CHECK(closed);
  CHECK(console.buffered() <= 64 * 1024 + kSpliceRead);
  // What the reader finally gets is whole lines of the worker's, in order.
  std::string got;
  out.Take(got);
  REQUIRE(!got.empty());
  CHECK(all.compare(0, got.size(), got) == 0);
}

}  // namespace
}  // namespace dlaunch::launcher
