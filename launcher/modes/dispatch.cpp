#include "launcher/modes/dispatch.hpp"

#include <cstdio>

#include "launcher/core/exit.hpp"
#include "launcher/core/system.hpp"
#include "launcher/modes/head.hpp"
#include "launcher/modes/local.hpp"
#include "launcher/modes/mpi_bootstrap.hpp"
#include "launcher/process/process.hpp"

namespace dlaunch::launcher {

int RunInMode(const Plan& plan, const envmap::EnvMap& env) {
  if (const auto* head = std::get_if<HeadPlan>(&plan.run))
    return plan.explain ? ExplainHead(*head) : RunHead(*head, env);
  // The command's path, found here so that --explain refuses a command the run
  // could not start, with the run's exit code (126 or 127).
  const WorkerPlan& w = *plan.workers();
  Result<std::string> exe = w.argv.empty() && plan.explain ? Result<std::string>("") : ResolveCommand(w.argv.at(0));
  if (!exe.ok())
    return Fail(exe.status().code() == Code::kNotFound ? kExitNotFound : kExitNotExecutable, exe.status().message());
  if (plan.explain) {
    if (Status s = CheckRunFiles(w); !s.ok()) return Fail(kExitUsage, s.message());
    std::fputs(Explain(plan).c_str(), stdout);
    return 0;
  }
  const auto* agent = std::get_if<AgentPlan>(&plan.run);
  if (agent != nullptr && agent->rendezvous.from_mpi) {
    Result<std::string> endpoint = EndpointThroughMpi(agent->rendezvous);
    if (!endpoint.ok()) return Fail(kExitUsage, endpoint.status().message());
    Result<AgentPlan> joined = WithMpiEndpoint(*agent, *endpoint);
    if (!joined.ok()) return Fail(kExitUsage, joined.status().message());
    Plan with_endpoint = plan;
    with_endpoint.run = std::move(*joined);
    return RunLocal(with_endpoint, *exe);
  }
  return RunLocal(plan, *exe);
}

}  // namespace dlaunch::launcher
