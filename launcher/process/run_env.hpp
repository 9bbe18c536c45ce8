// Everything a node's run does to the world, behind one interface, as
// LevelDB's Env: it spawns and signals processes, reads the time and arms
// timers, catches signals and takes stacks only through a RunEnv. The mode
// builds the real one (SystemRunEnv) once and passes it down; the unit tests
// of the runner pass a fake one and drive a whole run, restarts, shutdown
// deadlines and hangs included, in microseconds.
//
// Every call happens on the event loop's thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "launcher/core/signals.hpp"
#include "launcher/core/timers.hpp"
#include "launcher/process/process_control.hpp"
#include "launcher/stacks/stacks.hpp"

namespace dlaunch::launcher {

class RunEnv {
 public:
  virtual ~RunEnv() = default;
  virtual Timers& timers() = 0;
  virtual SignalSource& signals() = 0;
  // The processes of one run (one generation of the workers).
  virtual std::unique_ptr<ProcessControl> NewProcesses() = 0;
  // A stack taker whose dumps go to `dumps_dir`, each collection bounded by `limit`.
  virtual std::unique_ptr<StackTaker> NewStackTaker(const std::string& dumps_dir, std::chrono::milliseconds limit) = 0;
  // The mark every worker's environment carries for the watchdog (empty: none).
  virtual std::string job_mark() const = 0;
};

// Real processes under `watchdog` (started), asio's timers and signals on
// `io`, and gdb or the Python hook for stacks. `io` and `watchdog` must
// outlive it.
class SystemRunEnv final : public RunEnv {
 public:
  SystemRunEnv(boost::asio::io_context& io, Watchdog& watchdog);
  Timers& timers() override { return timers_; }
  SignalSource& signals() override { return signals_; }
  std::unique_ptr<ProcessControl> NewProcesses() override;
  std::unique_ptr<StackTaker> NewStackTaker(const std::string& dumps_dir, std::chrono::milliseconds limit) override;
  std::string job_mark() const override;

 private:
  boost::asio::io_context& io_;
  Watchdog& watchdog_;
  AsioTimers timers_;
  AsioSignals signals_;
};

}  // namespace dlaunch::launcher
