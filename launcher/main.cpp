// dlaunch: a native launcher for distributed training.
//
// main() only wires: it reads the outside world once (argv, the environment,
// this machine), decides (launcher/config/plan.hpp), and hands the Plan to the
// mode that runs it (launcher/modes/). It is the only place that turns a failed
// Status into an exit code (launcher/core/exit.hpp).
#include <cstdio>
#include <random>
#include <string_view>

#include <fmt/format.h>

#include "envmap/detect.hpp"
#include "launcher/config/cli.hpp"
#include "launcher/config/coordinator_options.hpp"
#include "launcher/config/plan.hpp"
#include "launcher/core/exit.hpp"
#include "launcher/core/system.hpp"
#include "launcher/modes/daemon.hpp"
#include "launcher/modes/head.hpp"
#include "launcher/modes/local.hpp"
#include "launcher/modes/mpi_bootstrap.hpp"

using namespace dlaunch;
using namespace dlaunch::launcher;

namespace {

MachineFacts ReadMachine(const envmap::EnvMap& env) {
  std::random_device rd;
  return MachineFacts{HostName(), CpuCount(), VisibleGpus(env), fmt::format("{:08x}{:08x}", rd(), rd())};
}

}  // namespace

int main(int argc, char** argv) {
  envmap::EnvMap env = ReadEnvironment();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "coordinator") {
    Result<DaemonPlan> daemon = DecideDaemon({args.begin() + 1, args.end()}, env);
    if (!daemon.ok()) return Fail(kExitUsage, daemon.status().message(), kDaemonName);
    return RunCoordinatorDaemon(*daemon);
  }
  Result<Options> flags = ParseCommandLine(args, env);
  if (!flags.ok()) return Fail(kExitUsage, flags.status().message());
  if (flags->help) {
    std::fputs(UsageText().c_str(), stdout);
    return 0;
  }
  if (flags->version) {
    std::puts("dlaunch 0.1.0");
    return 0;
  }

  Result<Plan> plan = Decide(*flags, envmap::Detect(env), ReadMachine(env), env);
  if (!plan.ok()) return Fail(kExitUsage, plan.status().message());
  if (plan->mode == Mode::kHead) return plan->explain ? ExplainHead(plan->head) : RunHead(plan->head, env);
  if (plan->explain) {
    std::fputs(Explain(*plan).c_str(), stdout);
    return 0;
  }
  if (plan->rendezvous.from_mpi) {
    Result<std::string> endpoint = EndpointThroughMpi(plan->rendezvous);
    if (!endpoint.ok()) return Fail(kExitUsage, endpoint.status().message());
    SetMpiEndpoint(*plan, *endpoint);
  }
  return RunLocal(*plan);
}
