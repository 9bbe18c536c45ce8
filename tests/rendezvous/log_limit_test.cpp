// The rate limit on log lines that peers cause, with a fake clock.
#include "rendezvous/log_limit.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <string>
#include <vector>

namespace dlaunch::rendezvous {

using namespace std::chrono_literals;

namespace {

struct Fixture {
  std::vector<std::string> lines;
  LogLimiter limiter{[this](const std::string& line) { lines.push_back(line); }, 10s, 3};
  const LogLimiter::Clock::time_point t0{};

  static LogLimiter::Held Count(const std::string& what) {
    return [what](std::size_t n) { return fmt::format("{} more {}", n, what); };
  }
  void Log(const std::string& key, int i, std::chrono::milliseconds at) {
    limiter.Log(key, fmt::format("{} {}", key, i), Count(key), t0 + at);
  }
};

}  // namespace

TEST_CASE("log limit: a flood gives the burst, then one count per window", "[log_limit]") {
  Fixture f;
  for (int i = 0; i < 5000; ++i) f.Log("beat", i, std::chrono::milliseconds(i));  // 5,000 in 5s
  CHECK(f.lines == std::vector<std::string>{"beat 0", "beat 1", "beat 2"});
  f.limiter.Tick(f.t0 + 9999ms);
  CHECK(f.lines.size() == 3);  // the window is not over yet
  f.limiter.Tick(f.t0 + 10s);
  CHECK(f.lines == std::vector<std::string>{"beat 0", "beat 1", "beat 2", "4997 more beat"});
  f.limiter.Tick(f.t0 + 30s);
  CHECK(f.lines.size() == 4);  // nothing held since: no second count
}

TEST_CASE("log limit: a new window starts with a full burst, and ends the old one first", "[log_limit]") {
  Fixture f;
  for (int i = 0; i < 4; ++i) f.Log("beat", i, 0ms);
  // No Tick: the next line after the window ends the old one itself.
  f.Log("beat", 4, 12s);
  f.Log("beat", 5, 12s);
  CHECK(f.lines == std::vector<std::string>{"beat 0", "beat 1", "beat 2", "1 more beat", "beat 4", "beat 5"});
}

TEST_CASE("log limit: each key has a budget of its own", "[log_limit]") {
  Fixture f;
  for (int i = 0; i < 10; ++i) f.Log("beat", i, 0ms);
  f.Log("drop", 0, 1s);
  CHECK(f.lines == std::vector<std::string>{"beat 0", "beat 1", "beat 2", "drop 0"});
  f.limiter.Tick(f.t0 + 10s);  // beat's window ends; drop's goes on to 11s
  CHECK(f.lines.back() == "7 more beat");
  f.limiter.Tick(f.t0 + 11s);
  CHECK(f.lines.size() == 5);  // drop held nothing back
}

TEST_CASE("log limit: Flush writes the counts due at once", "[log_limit]") {
  Fixture f;
  for (int i = 0; i < 5; ++i) f.Log("beat", i, 0ms);
  f.Log("drop", 0, 0ms);
  f.limiter.Flush();
  CHECK(f.lines == std::vector<std::string>{"beat 0", "beat 1", "beat 2", "drop 0", "2 more beat"});
  f.limiter.Tick(f.t0 + 1h);
  CHECK(f.lines.size() == 5);
}

TEST_CASE("log limit: no sink writes nothing and keeps nothing", "[log_limit]") {
  LogLimiter limiter(nullptr, 10s, 1);
  limiter.Log(
      "k", "line", [](std::size_t) { return std::string("count"); }, LogLimiter::Clock::time_point{});
  limiter.Tick(LogLimiter::Clock::time_point{} + 1h);
  SUCCEED();
}

}  // namespace dlaunch::rendezvous

namespace dlaunch::rendezvous {

TEST_CASE("AcceptBackoff: waits 100 ms doubling to 1 s, says a shortage once, flaps included", "[log_limit]") {
  using namespace std::chrono_literals;
  AcceptBackoff b;
  const AcceptBackoff::Clock::time_point t0{};
  CHECK_FALSE(b.Accepted());  // nothing was said: no "again"
  AcceptBackoff::Retry r = b.Failed(t0);
  CHECK(r.wait == 100ms);
  CHECK(r.say);
  std::vector<std::chrono::milliseconds> waits;
  for (int i = 0; i < 5; ++i) {
    r = b.Failed(t0 + 1s);
    waits.push_back(r.wait);
    CHECK_FALSE(r.say);
  }
  CHECK(waits == std::vector<std::chrono::milliseconds>{200ms, 400ms, 800ms, 1000ms, 1000ms});
  CHECK(b.Accepted());  // "accepting again", once
  CHECK_FALSE(b.Accepted());
  // A flap within the minute: the wait starts again at 100 ms, nothing is said.
  r = b.Failed(t0 + 30s);
  CHECK(r.wait == 100ms);
  CHECK_FALSE(r.say);
  CHECK_FALSE(b.Accepted());  // and no "again" for a shortage not said
  // A shortage that comes back within the minute and lasts is said once the minute is over.
  CHECK_FALSE(b.Failed(t0 + 40s).say);
  CHECK_FALSE(b.Failed(t0 + 59s).say);
  CHECK(b.Failed(t0 + 60s).say);
  CHECK_FALSE(b.Failed(t0 + 61s).say);
  CHECK(b.Accepted());
}

}  // namespace dlaunch::rendezvous
