// dlaunch: a native launcher for distributed training.
//
// main() only wires: it reads the outside world once (argv, the environment,
// this machine), decides (launcher/config/plan.hpp, job_plan.hpp), and hands
// the Plan to the mode that runs it (launcher/modes/dispatch.hpp), or to the
// subcommand that runs it (launcher/commands/), returning its code. A decision that fails is exit code 2
// (launcher/core/exit.hpp).
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string_view>

#include <fmt/format.h>

#include "envmap/detect.hpp"
#include "launcher/commands/daemon.hpp"
#include "launcher/commands/job.hpp"
#include "launcher/commands/live_client.hpp"
#include "launcher/config/cli.hpp"
#include "launcher/config/coordinator_options.hpp"
#include "launcher/config/job_plan.hpp"
#include "launcher/config/live_options.hpp"
#include "launcher/config/plan.hpp"
#include "launcher/core/exit.hpp"
#include "launcher/core/std_fds.hpp"
#include "launcher/core/system.hpp"
#include "launcher/config/colon_groups.hpp"
#include "launcher/config/groups.hpp"
#include "launcher/modes/dispatch.hpp"
#include "launcher/watchdog/job_mark.hpp"
#include "launcher/watchdog/watch.hpp"
#include "rendezvous/codec.hpp"

// Written by the build (cmake/BuildInfo.cmake): what --version says.
namespace dlaunch {
extern const char kBuildVersion[];
extern const char kBuildCommit[];
extern const char kBuildType[];
}  // namespace dlaunch

using namespace dlaunch;
using namespace dlaunch::launcher;

namespace {

// A fresh run id: 16 hex digits from the kernel, as the job mark is made
// (std::random_device would ask the processor first, cpuid, a trap to the
// hypervisor on a virtual machine), else from the clock and the pid.
std::string FreshId() {
  Result<std::string> mark = NewJobMark();
  if (mark.ok()) return mark->substr(0, 16);
  return fmt::format("{:016x}", static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^
                                    static_cast<uint64_t>(getpid()));
}

MachineFacts ReadMachine(const envmap::EnvMap& env) {
  return MachineFacts{HostName(), PythonCpuCount(env), VisibleGpus(env), FreshId()};
}

// `dlaunch job SPEC.yml ...`: the spec becomes flags, then a plan like any other.
int Job(const std::vector<std::string>& args, const envmap::EnvMap& env) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    std::fputs(JobUsage().c_str(), args.empty() ? stderr : stdout);
    return args.empty() ? kExitUsage : 0;
  }
  Result<JobPlan> job = DecideJob(args, env, ReadMachine(env));
  if (!job.ok()) return Fail(kExitUsage, job.status().message());
  return RunJob(*job, env);
}

}  // namespace

int main(int argc, char** argv) {
  // dlaunch-watch's second stage: what the watchdog executes once the launcher
  // is gone (launcher/watchdog/watch.hpp).
  if (argc == 4 && std::string_view(argv[0]) == kWatchProgramName) return WatchMain({argv + 1, argv + argc});
  // First of all: a descriptor among 0-2 left closed by whoever started us
  // would go to the next file opened, a pipe of the watchdog's or a worker's.
  if (Status s = OpenClosedStandardFds(); !s.ok()) return Fail(1, s.message());
  KeepHostLookupsBuiltIn();
  envmap::EnvMap env = ReadEnvironment();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "job") return Job({args.begin() + 1, args.end()}, env);
  if (!args.empty() && args[0] == "coordinator") {
    Result<DaemonPlan> daemon = DecideDaemon({args.begin() + 1, args.end()}, env);
    if (!daemon.ok()) return Fail(kExitUsage, daemon.status().message(), kDaemonName);
    return RunCoordinatorDaemon(*daemon);
  }
  if (!args.empty() && (args[0] == "status" || args[0] == "stacks")) {
    Result<LivePlan> live = DecideLive(args[0], {args.begin() + 1, args.end()});
    if (!live.ok()) return Fail(kExitUsage, live.status().message(), "dlaunch " + args[0]);
    return RunLiveClient(*live, env);
  }
  Result<JobLine> line = ParseJobLine(args, env);
  if (!line.ok()) return Fail(kExitUsage, line.status().message());
  const Options* flags = &line->options;
  if (flags->help) {
    std::fputs(UsageText().c_str(), stdout);
    return 0;
  }
  if (flags->version) {
    // The protocol, so that nodes that refuse each other can be told apart
    // from a bug: they differ in it.
    std::printf("dlaunch %s (commit %s, %s build, rendezvous protocol %d)\n", kBuildVersion, kBuildCommit, kBuildType,
                rendezvous::kProtocolVersion);
    return 0;
  }

  for (const std::string& line : flags->warnings) Fail(0, line);
  Result<Plan> plan = Decide(*flags, envmap::Detect(env), ReadMachine(env), env);
  if (plan.ok()) plan = WithPrograms(std::move(*plan), line->programs);
  if (!plan.ok()) return Fail(kExitUsage, plan.status().message());
  return RunInMode(*plan, env);
}
