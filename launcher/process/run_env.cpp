#include "launcher/process/run_env.hpp"

namespace dlaunch::launcher {

SystemRunEnv::SystemRunEnv(boost::asio::io_context& io, Watchdog& watchdog)
    : io_(io), watchdog_(watchdog), timers_(io), signals_(io) {}

std::unique_ptr<ProcessControl> SystemRunEnv::NewProcesses() {
  return std::make_unique<SystemProcesses>(io_, watchdog_);
}

std::unique_ptr<StackTaker> SystemRunEnv::NewStackTaker(const std::string& dumps_dir, std::chrono::milliseconds limit) {
  return std::make_unique<StackCollector>(io_, dumps_dir, limit);
}

std::string SystemRunEnv::job_mark() const { return watchdog_.job_mark(); }

}  // namespace dlaunch::launcher
