#include "launcher/process/process_control.hpp"

#include <signal.h>

#include <cerrno>

namespace dlaunch::launcher {

Result<PipedChild> SystemProcesses::Spawn(const SpawnSpec& spec) {
  Result<PipedChild> child = SpawnPiped(spec, false);
  if (child.ok()) watchdog_.Add(child->pid);
  return child;
}

void SystemProcesses::Signal(int pid, int sig) {
  if (kill(-pid, sig) != 0 && errno == ESRCH) kill(pid, sig);
}

void SystemProcesses::Release(int pid) {
  kill(-pid, SIGKILL);  // whatever the worker left behind in its group
  watchdog_.Remove(pid);
}

void SystemProcesses::StartReaping(std::function<void(int pid, ExitStatus status)> on_exit,
                                   std::function<void()> after) {
  reaper_ = std::make_unique<Reaper>(
      io_, [on_exit = std::move(on_exit)](int pid, int status) { on_exit(pid, FromWaitStatus(status)); },
      std::move(after));
  reaper_->Start();
}

void SystemProcesses::StopReaping() {
  if (reaper_) reaper_->Stop();
}

}  // namespace dlaunch::launcher
