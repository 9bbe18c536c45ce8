// Supervision per role: one node's workers split into domains, each with a
// Supervisor of its own, behind the interface of one Supervisor (what
// WorkerGroup and the runner use). A domain holds some of the node's local
// ranks: the main domain those of the groups without restarts of their own
// (every rank when the job has no groups), and each group with `restarts >= 0`
// (--role-restarts ROLE=N, envmap/programs.hpp) a domain alone.
//
// The rules between domains:
//   - a domain restarts alone, as its Supervisor decides; the others run on
//     untouched (no signal, no start);
//   - a domain that fails for good (a failure with no restart left, or a
//     worker that could not start, first or mid-restart, at once, as one
//     Supervisor stops every worker at the first failure; a domain that ends
//     failed otherwise, such as a no-progress verdict, once it is done) aborts
//     every other with its code (Supervisor::Abort), and its exit code and
//     root cause are the set's;
//   - a domain whose workers all exit 0 is done; the set is done when every
//     domain is, with 0 when every domain ended with 0 (mpirun's rule);
//   - a stop signal, Abort and Forward reach every domain.
// With one domain the set is exactly its Supervisor: the same calls reach the
// WorkerControl, and every accessor answers what the Supervisor's does.
//
// It owns no processes and no clock, as Supervisor. All methods are called
// from one thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "envmap/layout.hpp"
#include "envmap/programs.hpp"
#include "launcher/process/supervisor.hpp"

namespace dlaunch::launcher {

struct SupervisorDomain {
  std::string role;              // the group's ROLE_NAME; empty: the main domain
  std::vector<int> local_ranks;  // the node's local ranks it holds, ascending
  SupervisorOptions options;     // nproc: local_ranks.size()
};

// The domains of one node whose local slots are `slots` (envmap::LocalSlots):
// `job` alone over every slot when no group of `programs` with restarts has a
// rank here; otherwise the main domain first (omitted when it holds no rank),
// with `job`'s options, then one domain per group with restarts, in the
// table's order, with max_restarts = the group's restarts and the rest of
// `job`'s options. A rank `programs` does not place is the main domain's.
std::vector<SupervisorDomain> NodeDomains(const SupervisorOptions& job, const envmap::ProgramTable& programs,
                                          const std::vector<envmap::WorkerSlot>& slots);

class SupervisorSet {
 public:
  using State = Supervisor::State;

  // `control` must outlive the set; it sees the node's local ranks. The
  // domains must hold each of the local ranks 0..N-1 once.
  SupervisorSet(WorkerControl& control, std::vector<SupervisorDomain> domains);
  ~SupervisorSet();
  SupervisorSet(const SupervisorSet&) = delete;
  SupervisorSet& operator=(const SupervisorSet&) = delete;

  // Starts every domain in order. A start that fails is returned: the domains
  // already started are aborted with its code, the rest never start.
  Status Start(Clock::time_point now);
  // Each as Supervisor's, passed to every domain.
  void OnExit(int pid, ExitStatus status, Clock::time_point now);
  void OnStopSignal(int sig, Clock::time_point now);
  void Forward(int sig);
  void Abort(int code, Clock::time_point now);
  void OnTick(Clock::time_point now);
  void OnSampled(Clock::time_point now);

  // The earliest domain's; nullopt when none has anything pending.
  std::optional<Clock::time_point> deadline() const;
  // kRunning while any domain runs; kDone once all are done; else kStopping,
  // kWaiting or kIdle, the first any domain is in.
  State state() const;
  bool done() const;
  // Valid once done(): the code of the domain that failed for good first; else
  // the first domain's (main first) that is not 0; else 0.
  int exit_code() const;
  // The main domain's restarts (0 when this node has none of its ranks).
  int restart_count() const;
  // The root cause of the domain that failed for good first; before that, the
  // main domain's (as a Supervisor's, in its failing generation). A role
  // domain's failure that it restarts from is its own business: not shown.
  // With the node's local rank; valid until the next call into the set.
  const WorkerRecord* root_cause() const;
  // Every domain's workers of their current generation, by the node's local
  // rank (empty before Start). The reference is valid until the next call.
  const std::vector<WorkerRecord>& workers() const;
  // The first domain's (main first) that is not 0.
  int stop_signal() const;

  size_t domain_count() const { return domains_.size(); }

 private:
  class Control;

  void Settle(Clock::time_point now);
  void AbortOthers(size_t failed, Clock::time_point now);
  const std::vector<WorkerRecord>& Merged() const;

  std::vector<SupervisorDomain> domains_;
  std::vector<std::unique_ptr<Control>> controls_;        // one per domain; the supervisor's
  std::vector<std::unique_ptr<Supervisor>> supervisors_;  // one per domain
  WorkerControl& control_;
  int main_ = -1;              // the main domain's index; -1: none on this node
  int failed_ = -1;            // the domain that failed for good first, on its own
  bool from_outside_ = false;  // a stop signal or Abort: no domain's end is its own failure
  bool direct_ = false;        // one domain over local ranks 0..N-1: its records as they are
  mutable std::vector<WorkerRecord> merged_;
};

}  // namespace dlaunch::launcher
