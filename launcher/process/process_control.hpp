// The worker group's hold on real processes, behind an interface that the
// tests fake (as Supervisor's WorkerControl is): spawn with pipes, signal,
// release, and hear of exits. All calls happen on the event loop's thread.
#pragma once

#include <functional>
#include <memory>

#include <boost/asio/io_context.hpp>

#include "base/status.hpp"
#include "launcher/process/process.hpp"
#include "launcher/process/streams.hpp"
#include "launcher/process/supervisor.hpp"

namespace dlaunch::launcher {

class ProcessControl {
 public:
  virtual ~ProcessControl() = default;
  // Starts `spec` as the leader of a process group of its own, its stdout and
  // stderr on new pipes whose read ends the caller then owns (SpawnPiped).
  // Returns an error naming the command, with nothing left open.
  virtual Result<PipedChild> Spawn(const SpawnSpec& spec) = 0;
  // Sends `sig` to the process group `pid` leads (to `pid` alone when it has
  // no group yet).
  virtual void Signal(int pid, int sig) = 0;
  // `pid` has exited or is given up: SIGKILL what is left of its group, and
  // stop guarding it.
  virtual void Release(int pid) = 0;
  // From now until StopReaping: `on_exit(pid, status)` for each child that
  // exits, then `after()` once per batch, each from a handler of its own.
  virtual void StartReaping(std::function<void(int pid, ExitStatus status)> on_exit, std::function<void()> after) = 0;
  virtual void StopReaping() = 0;
};

// The real one: forks (SpawnPiped), kills process groups, registers each with
// the watchdog, and reaps on SIGCHLD (Reaper). `io` and `watchdog` must outlive it.
class SystemProcesses : public ProcessControl {
 public:
  SystemProcesses(boost::asio::io_context& io, Watchdog& watchdog) : io_(io), watchdog_(watchdog) {}

  Result<PipedChild> Spawn(const SpawnSpec& spec) override;
  void Signal(int pid, int sig) override;
  void Release(int pid) override;
  void StartReaping(std::function<void(int pid, ExitStatus status)> on_exit, std::function<void()> after) override;
  void StopReaping() override;

 private:
  boost::asio::io_context& io_;
  Watchdog& watchdog_;
  std::unique_ptr<Reaper> reaper_;
};

}  // namespace dlaunch::launcher
