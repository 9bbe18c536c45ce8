#include "launcher/modes/dispatch.hpp"

#include <cstdio>

#include "launcher/core/exit.hpp"
#include "launcher/core/system.hpp"
#include "launcher/config/groups.hpp"
#include "launcher/modes/programs_glue.hpp"
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
  // With several programs each group's is found when the run knows its ranks
  // (RunPlanFor); --explain on a node of its own finds them here.
  bool later = (w.argv.empty() && plan.explain) || !w.programs.empty();
  Result<std::string> exe = later ? Result<std::string>("") : ResolveCommand(w.argv.at(0));
  if (!exe.ok())
    return Fail(exe.status().code() == Code::kNotFound ? kExitNotFound : kExitNotExecutable, exe.status().message());
  if (plan.explain) {
    if (Status s = CheckRunFiles(w); !s.ok()) return Fail(kExitUsage, s.message());
    std::string groups;
    if (const auto* node = std::get_if<NodePlan>(&plan.run); node != nullptr && !w.programs.empty()) {
      envmap::JobLayout layout;
      layout.nodes.assign(static_cast<size_t>(node->layout.nnodes), envmap::Node{"", "", w.nproc, {}});
      Result<envmap::ProgramTable> table = TableFor(w.programs, layout);
      Status s = table.ok() ? ResolvePrograms(*table) : table.status();
      if (!s.ok()) return Fail(s.code() == Code::kNotFound ? kExitNotFound : kExitUsage, s.message());
      groups = ExplainPrograms(*table);
    } else if (!w.programs.empty()) {
      groups = "groups: their ranks are numbered once the nodes have met\n";
    }
    std::fputs((Explain(plan) + groups).c_str(), stdout);
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
