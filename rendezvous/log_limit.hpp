// Bounds the log lines that peers cause. A peer decides how often it connects,
// fails a handshake or sends a bad heartbeat, so a line per event would let it
// flood the console of the dlaunch that hosts the coordinator. Each kind of line
// (a key) may write `burst` lines in each `window`; the rest are counted, and once
// the window is over one line says how many were held back.
//
// No clock of its own: the caller passes the time, so tests use a fake one. The
// caller keeps the number of keys small (kinds of line, not peers). Not
// thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace dlaunch::rendezvous {

// Default: 5 lines of each kind per 10s, then a count.
inline constexpr std::chrono::milliseconds kPeerLogWindow{10'000};
inline constexpr std::size_t kPeerLogBurst = 5;

class LogLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  using Sink = std::function<void(const std::string& line)>;
  // The line that says `held` lines of a key were not written ("dropped 7 more
  // connections in the last 10s").
  using Held = std::function<std::string(std::size_t held)>;

  explicit LogLimiter(Sink sink, std::chrono::milliseconds window = kPeerLogWindow, std::size_t burst = kPeerLogBurst);

  // Writes `line` when `key` has written fewer than `burst` lines in its current
  // window (which starts now when it has none), else counts it. `held` makes the
  // key's count line when its window ends with lines held back.
  void Log(const std::string& key, const std::string& line, Held held, Clock::time_point now);
  // Ends the windows that are over at `now`, writing their count lines. Call it
  // periodically; Log ends an old window of its own key too.
  void Tick(Clock::time_point now);
  // Ends every window now, writing the count lines due (a job has ended: its
  // counts are not to wait for a window that may never be ticked again).
  void Flush();

  std::chrono::milliseconds window() const { return window_; }

 private:
  struct Window {
    Clock::time_point start;
    std::size_t written = 0;
    std::size_t held = 0;
    Held held_line;
  };
  void End(std::map<std::string, Window>::iterator it);

  Sink sink_;
  std::chrono::milliseconds window_;
  std::size_t burst_;
  std::map<std::string, Window> windows_;  // keys with an open window
};

// The retry delays and the lines of an accept loop that is out of descriptors
// (EMFILE) or memory. The failed connection stays queued, so accepting again at
// once fails again at once: a busy loop. The loop waits 100 ms instead, doubling
// to 1 s. It says so once per shortage and at most once a minute: a shortage
// that lets a connection through now and then (a client leaves, a session times
// out) would otherwise be said again at every such flap, and one that comes back
// within the minute is said when the minute is over, if it still lasts.
// "Accepting again" answers a shortage that was said, once. Shared by the live
// view's server and the coordinator's; the caller passes the time.
class AcceptBackoff {
 public:
  using Clock = std::chrono::steady_clock;
  struct Retry {
    std::chrono::milliseconds wait;  // before the next accept
    bool say = false;                // the line "cannot accept connections" is due
  };
  // accept() failed at `now`.
  Retry Failed(Clock::time_point now);
  // accept() succeeded: true when "accepting connections again" is due.
  bool Accepted();

 private:
  std::chrono::milliseconds wait_{0};  // 0: accept() is not failing
  std::optional<Clock::time_point> said_;
  bool unanswered_ = false;  // said, and "accepting again" not yet
};

}  // namespace dlaunch::rendezvous
