#include "launcher/process/slurm_signals.hpp"

#include <csignal>
#include <fstream>

#include "launcher/core/text.hpp"

namespace dlaunch::launcher {
namespace {

std::string_view Trim(std::string_view s) {
  size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

}  // namespace

SlurmSignalScope SlurmScopeOf(const envmap::EnvMap& env, std::string_view proctrack_type) {
  SlurmSignalScope scope;
  auto job = env.find("SLURM_JOB_ID");
  auto step = env.find("SLURM_STEP_ID");
  if (job == env.end() || step == env.end() || step->second.empty()) return scope;
  // The batch step exports no SLURM_STEP_ID; these names are there for a step
  // that would.
  if (step->second == "batch" || step->second == "extern" || step->second == "4294967294" ||
      step->second == "4294967295")
    return scope;
  scope.step_wide = proctrack_type != "proctrack/pgid";
  return scope;
}

std::string ReadProctrackType(const envmap::EnvMap& env) {
  if (!env.contains("SLURM_JOB_ID")) return "";
  auto conf = env.find("SLURM_CONF");
  std::ifstream in(conf != env.end() ? conf->second : "/etc/slurm/slurm.conf");
  std::string line;
  while (std::getline(in, line)) {
    // "ProctrackType=proctrack/cgroup", keys case-insensitive, '#' comments.
    std::string_view l = Trim(line);
    if (l.empty() || l[0] == '#') continue;
    size_t eq = l.find('=');
    if (eq == std::string_view::npos || Upper(Trim(l.substr(0, eq))) != "PROCTRACKTYPE") continue;
    std::string_view value = Trim(l.substr(eq + 1));
    value = value.substr(0, value.find_first_of(" \t#"));
    return std::string(value);
  }
  return "";
}

bool PassOnToWorkers(const SlurmSignalScope& scope, std::string_view sender_command) {
  return !(scope.step_wide && sender_command == "slurmstepd");
}

namespace {
constexpr std::string_view kPassOnPrefix = "signal ";
}  // namespace

std::string PassOnQuery(int sig) { return std::string(kPassOnPrefix) + SignalName(sig); }

std::optional<int> PassedOnSignal(std::string_view what) {
  if (!what.starts_with(kPassOnPrefix)) return std::nullopt;
  int sig = SignalNumber(what.substr(kPassOnPrefix.size()));
  if (sig != SIGUSR1 && sig != SIGUSR2) return std::nullopt;
  return sig;
}

}  // namespace dlaunch::launcher
