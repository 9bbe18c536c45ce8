// Straggler detection wired to a node's run and to the coordinator's host
// (launcher/straggler/ has the parts: samples, windows, detector, watch).
//   - Every node: NodeStraggler reads its ranks' windows, for its own watch
//     (a single node) or as the items of the coordinator's "profile" question.
//   - The process that compares: a single node's dlaunch (LocalStragglerWatch)
//     or the one hosting a rendezvous job's coordinator (JobStragglerWatch,
//     which asks every node each window).
// Every call happens on the event loop's thread.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "envmap/layout.hpp"
#include "launcher/config/straggler_flags.hpp"
#include "launcher/core/console.hpp"
#include "launcher/core/events.hpp"
#include "launcher/core/timers.hpp"
#include "launcher/process/runner.hpp"
#include "launcher/straggler/node_windows.hpp"
#include "launcher/straggler/proc_sampler.hpp"
#include "launcher/straggler/straggler_watch.hpp"
#include "rendezvous/server.hpp"

namespace dlaunch::launcher {

// The question the host asks every node each window.
inline constexpr std::string_view kProfileQuery = "profile";

class NodeStraggler {
 public:
  // `dumps_dir`: the run's private directory (DLAUNCH_STACKS_DIR). With
  // --straggler-native a timer on `timers` looks at every running rank from
  // /proc each sample period (a rank that writes no samples file is compared
  // by what it shows there).
  NodeStraggler(const StragglerFlags& flags, std::string dumps_dir, Console& console, Timers& timers);
  ~NodeStraggler();
  // The run whose ranks are looked at from now on (null: none), and its layout.
  void SetRun(WorkerRun* run, const envmap::JobLayout* layout);
  // This node's running ranks' windows since the last call.
  std::vector<RankWindow> Take(WorkerRun& run, const envmap::JobLayout& layout);
  // The same, as the items of a Report to the "profile" question.
  std::vector<std::string> Items(WorkerRun& run, const envmap::JobLayout& layout);
  // The watch of this process, while it has one (the live view shows it).
  void SetWatch(const StragglerWatch* watch) { watch_ = watch; }
  const StragglerWatch* watch() const { return watch_; }

 private:
  void LookNatively();

  std::unique_ptr<NativeSampler> native_;  // --straggler-native
  std::unique_ptr<Timer> native_timer_;
  std::set<int> watched_;  // pids native_ watches
  WorkerRun* run_ = nullptr;
  const envmap::JobLayout* layout_ = nullptr;
  Timers& timers_;
  NodeWindows windows_;
  const StragglerWatch* watch_ = nullptr;
};

// The watch of a single node: compares its own ranks. `run` gives the running
// run (null between runs); `layout` the job's. Null when detection is off.
std::unique_ptr<StragglerWatch> LocalStragglerWatch(const StragglerFlags& flags, Timers& timers, EventLog& events,
                                                    Console& console, NodeStraggler& node,
                                                    std::function<WorkerRun*()> run, const envmap::JobLayout& layout);

// The watch of the process hosting a rendezvous job's coordinator: asks every
// node of `run_id` on `server` (which must outlive it) each window, and stops
// the whole job with --straggler-action stop. Null when detection is off.
std::unique_ptr<StragglerWatch> JobStragglerWatch(const StragglerFlags& flags, Timers& timers, EventLog& events,
                                                  Console& console, rendezvous::CoordinatorServer& server,
                                                  const std::string& run_id);

}  // namespace dlaunch::launcher
