// dlaunch: a native launcher for distributed training.
//
// main() only wires: it reads the outside world once (argv, the environment,
// this machine), decides (launcher/config/plan.hpp), and hands the Plan to the
// mode that runs it (launcher/modes/). It is the only place that turns a failed
// Status into an exit code (launcher/core/exit.hpp).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "envmap/detect.hpp"
#include "launcher/config/cli.hpp"
#include "launcher/config/coordinator_options.hpp"
#include "launcher/config/job_plan.hpp"
#include "launcher/config/live_options.hpp"
#include "launcher/config/plan.hpp"
#include "launcher/core/exit.hpp"
#include "launcher/core/output.hpp"
#include "launcher/core/system.hpp"
#include "launcher/modes/daemon.hpp"
#include "launcher/modes/head.hpp"
#include "launcher/modes/live_client.hpp"
#include "launcher/modes/local.hpp"
#include "launcher/modes/mpi_bootstrap.hpp"
#include "launcher/modes/remote.hpp"

using namespace dlaunch;
using namespace dlaunch::launcher;

namespace {

MachineFacts ReadMachine(const envmap::EnvMap& env) {
  std::random_device rd;
  return MachineFacts{HostName(), CpuCount(), VisibleGpus(env), fmt::format("{:08x}{:08x}", rd(), rd())};
}

int Dispatch(Plan& plan, const envmap::EnvMap& env) {
  if (plan.mode == Mode::kHead) return plan.explain ? ExplainHead(plan.head) : RunHead(plan.head, env);
  if (plan.explain) {
    std::fputs(Explain(plan).c_str(), stdout);
    return 0;
  }
  if (plan.rendezvous.from_mpi) {
    Result<std::string> endpoint = EndpointThroughMpi(plan.rendezvous);
    if (!endpoint.ok()) return Fail(kExitUsage, endpoint.status().message());
    SetMpiEndpoint(plan, *endpoint);
  }
  return RunLocal(plan);
}

// `dlaunch job SPEC.yml ...`: the spec becomes flags, then a plan like any other.
int RunJob(const std::vector<std::string>& args, const envmap::EnvMap& env) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    std::fputs(JobUsage().c_str(), args.empty() ? stderr : stdout);
    return args.empty() ? kExitUsage : 0;
  }
  Result<JobPlan> job = DecideJob(args, env, ReadMachine(env));
  if (!job.ok()) return Fail(kExitUsage, job.status().message());
  const JobSpec& spec = job->spec;
  if (!spec.not_applied.empty())
    WriteAll(STDERR_FILENO, fmt::format("dlaunch: {}: not applied here (the platform's): {}\n", job->file,
                                        fmt::join(spec.not_applied, ", ")));
  if (job->plan.explain) {
    std::vector<std::string> shown;
    for (const std::string& f : job->flags) shown.push_back(ShellQuote(f));
    std::printf("job: %s: %d instance(s), %d process(es) in all, as: dlaunch %s\n", job->file.c_str(), spec.instances,
                spec.WorldSize(), fmt::format("{}", fmt::join(shown, " ")).c_str());
    std::fflush(stdout);
  }
  if (!spec.code_dir.empty() && chdir(spec.code_dir.c_str()) != 0)
    return Fail(kExitUsage, fmt::format("{}: code.path {}: cannot enter ({})", job->file, spec.code_dir, std::strerror(errno)));
  if (!job->hostfile_path.empty() && !job->plan.explain) {
    std::ofstream f(job->hostfile_path, std::ios::trunc);
    f << job->hostfile;
    if (!f) return Fail(1, fmt::format("{}: cannot write", job->hostfile_path));
  }
  int code = Dispatch(job->plan, env);
  if (!job->hostfile_path.empty()) std::remove(job->hostfile_path.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  envmap::EnvMap env = ReadEnvironment();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "job") return RunJob({args.begin() + 1, args.end()}, env);
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
  return Dispatch(*plan, env);
}
