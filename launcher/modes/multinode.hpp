// A job across nodes through the TCP rendezvous: host the coordinator when this
// node is the endpoint, join it, and run every generation it assigns.
#pragma once

#include "envmap/layout.hpp"
#include "launcher/config/plan.hpp"
#include "launcher/core/event_loop.hpp"
#include "launcher/live/job_live.hpp"
#include "launcher/live/live.hpp"
#include "launcher/metrics/metrics.hpp"
#include "launcher/process/process.hpp"
#include "launcher/modes/straggler_glue.hpp"
#include "launcher/process/runner.hpp"

namespace dlaunch::launcher {

// Runs this node's part of the job and returns its exit code: 0 only when every
// rank on every node finished with 0. `plan` is complete but for its layout,
// which comes from the coordinator: each generation runs a copy with its own. Bad rendezvous flags print one line and
// return 2; a join that fails prints the coordinator's reason and returns 1.
// Runs `loop` until the job has ended; every line goes through `console`, on the loop.
// `live` (must outlive the call) serves each generation's run while it runs;
// when this node hosts the coordinator, `view` serves the whole job meanwhile,
// and `metrics` reads that coordinator's counters. `programs`: several
// programs (launcher/config/groups.hpp), numbered again each generation.
int RunMultiNode(const RendezvousPlan& rendezvous, const RunPlan& plan, RunEnv& env, EventLoop& loop, Console& console,
                 RunLiveSource& live, SwitchLiveSource& view, LauncherMetrics& metrics, NodeStraggler& straggler,
                 const StragglerFlags& straggler_flags, const envmap::ProgramPlan& programs);

}  // namespace dlaunch::launcher
