// Several programs in one job, from the command line to the table a run reads:
//
//   dlaunch -np 1 --role trainer -- python train.py : -np 3 --role rollout -- python serve.py
//   dlaunch --nproc-per-node 4 --multi-prog job.conf
//
// The command line is read by colon_groups.hpp (ParseJobLine). Here
// WithPrograms puts the groups into the Plan, and TableFor numbers their ranks
// once the layout is known; modes/programs_glue.hpp finds each group's program.
#pragma once

#include <string>
#include <vector>

#include "base/status.hpp"
#include "envmap/layout.hpp"
#include "envmap/programs.hpp"
#include "launcher/config/plan.hpp"

namespace dlaunch::launcher {

// The plan with `programs` in its workers, checked against the mode: groups run
// per process (not --launch-mode per-node), without --roles, one dlaunch a node
// (not one a worker, except for --multi-prog), and a role restarted alone on one
// node. A head launch does not start groups yet: it fails, saying what does.
Result<Plan> WithPrograms(Plan plan, const envmap::ProgramPlan& programs);

// The table of a run on `layout`: the colon groups' counts on each node in
// turn, or the --multi-prog file's lines over the world size, with
// --role-restarts applied. Fails naming the group, the node or FILE:LINE.
Result<envmap::ProgramTable> TableFor(const envmap::ProgramPlan& programs, const envmap::JobLayout& layout);

// --explain's lines for the groups: each group's role, ranks and command, and
// for a role restarted alone its world.
std::string ExplainPrograms(const envmap::ProgramTable& table);

}  // namespace dlaunch::launcher
