#include "launcher/modes/programs_glue.hpp"

#include <fmt/format.h>

#include "launcher/config/groups.hpp"
#include "launcher/core/spawn.hpp"

namespace dlaunch::launcher {

Status ResolvePrograms(envmap::ProgramTable& table) {
  for (envmap::ProgramGroup& g : table.groups) {
    Result<std::string> exe = ResolveCommand(g.argv.at(0));
    if (!exe.ok()) {
      std::string message = fmt::format("{} ({}): {}", g.line, g.role, exe.status().message());
      return exe.status().code() == Code::kNotFound ? Status::NotFound(message) : Status::InvalidArgument(message);
    }
    g.exe = std::move(*exe);
  }
  return Status::Ok();
}

Status PreparePrograms(const envmap::ProgramPlan& programs, RunPlan& plan, std::vector<PortReservation>& holds) {
  if (programs.empty()) return Status::Ok();
  Result<envmap::ProgramTable> table = TableFor(programs, plan.layout);
  if (!table.ok()) return table.status();
  if (Status s = ResolvePrograms(*table); !s.ok()) return s;
  for (envmap::ProgramGroup& g : table->groups) {
    if (g.restarts < 0) continue;
    Result<PortReservation> port = PortReservation::AnyFreeForStore();
    if (!port.ok()) return port.status();
    g.world_port = port->port();
    holds.push_back(std::move(*port));
  }
  plan.programs = std::move(*table);
  return Status::Ok();
}

}  // namespace dlaunch::launcher
