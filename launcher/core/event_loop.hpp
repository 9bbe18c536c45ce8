// The one event loop of a dlaunch process.
//
// The rule, for every mode (single node, node agent, head, coordinator daemon): a
// dlaunch process has one boost::asio::io_context, and only EventLoop::Run runs
// it, once, on the main thread. Handlers run there one at a time and return
// promptly: none blocks on a pipe, a socket or the console, none sleeps, and none
// runs the loop itself. Whatever must wait (a connect, a pipe, a child, a
// deadline) arms a handler and returns. So heartbeats, signals and the
// coordinator always get their turn, whatever else the process is waiting for.
//
// A mode ends the process with Exit(code): Run returns after the handler that
// called it. Objects that own sockets, timers or descriptors on io() must be
// destroyed before the EventLoop (declare the loop first); handlers still queued
// then are destroyed without running. After Run, the console's last flush
// (Console::Drain, launcher/core/console.hpp) runs the loop once more through
// RunWhile and RunReady below, until a slow reader has taken everything, or
// briefly after a stop signal. Nothing else runs an io_context: the build's
// `layering` test refuses a call to run, run_one, poll ... outside this file's
// .cpp.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include <boost/asio/io_context.hpp>

namespace dlaunch::launcher {

class EventLoop {
 public:
  EventLoop() = default;
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  boost::asio::io_context& io() { return io_; }

  // Ends Run with `code` once the current handler returns. Only the first call counts.
  void Exit(int code) {
    if (code_) return;
    code_ = code;
    io_.stop();
  }

  // Runs handlers until Exit and returns its code. A loop that runs out of work
  // without Exit is a programmer error; it returns 1 after one line on stderr.
  int Run();

 private:
  boost::asio::io_context io_;
  std::optional<int> code_;
};

// The loop after Run has returned, for the console's last flush: handlers run
// one at a time while `more()` holds and there is work. RunReady then runs the
// handlers already queued (the ones just cancelled), so none outlives its frame.
void RunWhile(boost::asio::io_context& io, const std::function<bool()>& more);
void RunReady(boost::asio::io_context& io);

// Default: the grid that a dlaunch's periodic timers of kTimerGrid or longer
// land on (the loop's health tick, the scans for adopted processes), so that
// they wake the process together and not each on its own: on the (virtual)
// machines this project is measured on, a wakeup costs 0.1-0.3 ms of CPU, most
// of what a quiet job costs an hour (bench/run.sh, bench/profile/metrics.md).
inline constexpr std::chrono::milliseconds kTimerGrid{2000};

// The latest point of the timer grid not after `at`: a deadline kTimerGrid or
// more ahead lands on the grid, never later than asked and never in the past.
inline std::chrono::steady_clock::time_point OnTimerGrid(std::chrono::steady_clock::time_point at) {
  auto since = at.time_since_epoch();
  return std::chrono::steady_clock::time_point(since - since % kTimerGrid);
}

// Cancelling a timer or a signal set does not recall a completion that is
// already queued: a signal or a deadline that came just before its owner was
// destroyed still runs, with success. An object that arms handlers capturing
// `this` holds a Lifetime and has each handler capture token(); the handler
// returns at once when the token has expired.
class Lifetime {
 public:
  std::weak_ptr<void> token() const { return alive_; }

 private:
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace dlaunch::launcher
