// What the console's unit tests share (tests/launcher/core/ and the streams'
// in tests/launcher/process/): a pipe whose reader stalls until told to read,
// and numbered lines to fill it.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <fmt/format.h>

namespace dlaunch::testing {

// A pipe whose reader reads only when told to, like `| (sleep 40; wc -l)`.
struct StalledPipe {
  StalledPipe() {
    signal(SIGPIPE, SIG_IGN);  // as main() does: a gone reader reads as EPIPE
    REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);  // the test's own end
  }
  ~StalledPipe() {
    if (fds[0] >= 0) close(fds[0]);
    close(fds[1]);
  }
  // Reads what the pipe holds now.
  std::string ReadNow() {
    std::string got;
    char buf[65536];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
    return got;
  }
  // Reads, running `io` between reads, until `want` bytes arrived or 10 s passed.
  std::string ReadAll(boost::asio::io_context& io, size_t want) {
    std::string got;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
      got += ReadNow();
      io.restart();
      io.run_for(std::chrono::milliseconds(5));
    }
    return got;
  }
  int fds[2] = {-1, -1};
};

// Lines of 105 bytes that fill more than a pipe the Console has grown (1 MiB)
// and a 64 KiB cap together.
inline constexpr int kOverfill = 12000;

inline std::string Lines(int first, int count, const char* tag) {
  std::string s;
  for (int i = first; i < first + count; ++i) s += fmt::format("{} {:0100d}\n", tag, i);
  return s;
}

}  // namespace dlaunch::testing
