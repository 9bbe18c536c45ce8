// Signals that the process catches, behind an interface that a test raises by
// hand. The real one, AsioSignals, is built once by the mode and passed down.
//
// Every call happens on the event loop's thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

namespace dlaunch::launcher {

// Catching, while it lives: destroying it gives the signals back.
class SignalWatch {
 public:
  virtual ~SignalWatch() = default;
  // No more calls of the handler, though the signals stay caught (so that a
  // second Ctrl-C while the job ends does not kill dlaunch outright).
  virtual void Cancel() = 0;
};

class SignalSource {
 public:
  virtual ~SignalSource() = default;
  // Catches `signals` and calls `on_signal(sig)`, from a handler of its own,
  // for each that arrives, until the watch is cancelled or destroyed.
  virtual std::unique_ptr<SignalWatch> Watch(const std::vector<int>& signals,
                                             std::function<void(int sig)> on_signal) = 0;
  // The command name (/proc/PID/comm, e.g. "slurmstepd") of the process that
  // sent the last `sig` a watch heard; empty when unknown: the kernel sent it,
  // the sender lives in another PID namespace or is gone, or the source cannot
  // tell. Meant for the handler of `sig`, which runs before any later one.
  virtual std::string SenderCommand(int /*sig*/) const { return ""; }
};

// asio signal sets on `io` (which must outlive the watches).
class AsioSignals final : public SignalSource {
 public:
  explicit AsioSignals(boost::asio::io_context& io) : io_(io) {}
  std::unique_ptr<SignalWatch> Watch(const std::vector<int>& signals, std::function<void(int sig)> on_signal) override;
  std::string SenderCommand(int sig) const override;

 private:
  boost::asio::io_context& io_;
};

}  // namespace dlaunch::launcher
