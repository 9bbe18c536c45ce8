// Several programs in one node's run (launcher/config/groups.hpp): what the
// modes do once the layout is known, before the workers start.
#pragma once

#include <vector>

#include "base/status.hpp"
#include "envmap/programs.hpp"
#include "launcher/core/system.hpp"
#include "launcher/process/run_plan.hpp"

namespace dlaunch::launcher {

// Finds each group's program (envmap::ProgramGroup::exe) as ResolveCommand
// does; fails with its status (kNotFound: exit 127), naming the group.
Status ResolvePrograms(envmap::ProgramTable& table);

// Fills plan.programs for plan.layout: the table (TableFor), each group's
// program found (ResolvePrograms), and for each role restarted alone a free
// port for its world's MASTER_PORT, held in `holds` until its workers start.
// Nothing when `programs` is empty. Fails naming the group; a program not
// found is Code::kNotFound (exit 127).
Status PreparePrograms(const envmap::ProgramPlan& programs, RunPlan& plan, std::vector<PortReservation>& holds);

}  // namespace dlaunch::launcher
