// Time and timers, behind an interface that a test drives by hand. The parts
// that decide when things happen (the runner's shutdown deadline, the hang
// watch) read the time and arm their timers through Timers, never the steady
// clock or asio's timers directly, so that a unit test runs the real rule on
// a fake clock in microseconds. The real one, AsioTimers, is built once by
// the mode and passed down.
//
// Every call happens on the event loop's thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include <boost/asio/io_context.hpp>

namespace dlaunch::launcher {

using SteadyTime = std::chrono::steady_clock::time_point;

class Timer {
 public:
  virtual ~Timer() = default;
  // Calls `fire` once, from a handler of its own, at `at` or as soon after as
  // the loop gets to it (at once when `at` has passed). Arming again replaces
  // the earlier arming; Cancel() or destroying the timer drops it, and a
  // dropped `fire` never runs, even if its time had come.
  virtual void At(SteadyTime at, std::function<void()> fire) = 0;
  virtual void Cancel() = 0;
};

class Timers {
 public:
  virtual ~Timers() = default;
  virtual SteadyTime Now() const = 0;
  virtual std::unique_ptr<Timer> NewTimer() = 0;
};

// The steady clock, and asio timers on `io` (which must outlive the timers).
class AsioTimers final : public Timers {
 public:
  explicit AsioTimers(boost::asio::io_context& io) : io_(io) {}
  SteadyTime Now() const override { return std::chrono::steady_clock::now(); }
  std::unique_ptr<Timer> NewTimer() override;

 private:
  boost::asio::io_context& io_;
};

}  // namespace dlaunch::launcher
