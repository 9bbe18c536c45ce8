// A hang of a multi-node job, both ends of it. A node answers the coordinator's
// stacks query with StackItems; the process that hosts the coordinator (the
// hosting agent, multinode.cpp; the head, head.cpp; the coordinator daemon,
// daemon.cpp) shows the HangReport with JobHangReporter: the same lines as the
// single-node hang watch (runner.cpp), grouped over every rank of every node so
// that the odd rank out is the job's, the full stacks in a file, and the
// hang_suspected and stacks events. Everything runs on the event loop's thread.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "launcher/core/events.hpp"
#include "launcher/core/private_dir.hpp"
#include "launcher/jobwide/node_items.hpp"
#include "launcher/stacks/stacks.hpp"
#include "rendezvous/coordinator.hpp"

namespace dlaunch::launcher {

// The first line of a RankStack's raw dump that a node cut to fit its report; the
// host shows the parsed frames after it.
inline constexpr std::string_view kCutNote = "(dlaunch: the dump was cut to fit the rendezvous report; parsed frames:)";

// This node's stacks as the items of a rendezvous::Report: ToJson of each, by
// rank, each within rendezvous::kMaxString bytes and all within one frame. What
// does not fit goes, in this order: the raw dump (then kCutNote), the threads
// other than the main one, the main thread's outer frames; a rank that still
// does not fit is sent as not sampled, saying so.
std::vector<std::string> StackItems(const std::vector<RankStack>& stacks);

// The ranks of a HangReport, by rank: every item of every node that answered,
// parsed (rendezvous input: bounded, never throws). `problems` gets one line per
// node that did not answer ("node 1 (b), ranks 2-3: not sampled (no answer within
// 15s)") and per item that is not a stack of that node's ranks.
std::vector<RankStack> StacksOfReport(const rendezvous::HangReport& report, std::vector<std::string>& problems);

// A fresh directory for the stacks of a process that has no run directory (the
// head, the coordinator daemon): MakePrivateDir's, under TMPDIR when no other
// user can replace it there, else under /tmp (`note` says why). Kept when the
// process ends. Io naming the path on failure.
Result<PrivateDir> NewStacksDir();
// For JobHangReporter's `dir`: NewStacksDir's directory, made at the first call
// (at the first hang report: no job that never hangs leaves one), the same one
// after. `say` gets NewStacksDir's note, if any, once.
std::function<Result<std::string>()> KeptStacksDir(std::function<void(const std::string&)> say);

class JobHangReporter {
 public:
  // `say` prints one line (a Console adds "dlaunch: "). `events` may be null.
  // `dir` gives the directory for the stacks file, called at the first report
  // (a head makes one then).
  JobHangReporter(std::function<void(const std::string&)> say, EventLog* events,
                  std::function<Result<std::string>()> dir);

  // "no rank has made progress for 6s: collecting stacks".
  void Suspected(const rendezvous::HangSuspected& suspected);
  // The grouped summary over every rank, a line per node not sampled, and
  // "hang: full stacks in DIR/stacks-N.txt"; the events hang_suspected and
  // stacks; with `stop`, the root cause for --events and StopLines.
  void Report(const rendezvous::HangReport& report);

  // After a job that --hang-action stop ended (exit code 124), the lines to
  // print instead of the bare cause: "job stopped after a hang; exit code 124",
  // "root cause: CAUSE", then the summary as "  | ..." lines. Empty when no
  // report stopped the job.
  std::vector<std::string> StopLines(const std::string& cause) const;

 private:
  std::function<void(const std::string&)> say_;
  EventLog* events_;
  std::function<Result<std::string>()> dir_;
  std::vector<std::string> stop_summary_;  // the summary of the report that stopped the job
};

}  // namespace dlaunch::launcher
