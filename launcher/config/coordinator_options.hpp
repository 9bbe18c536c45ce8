// The one place a coordinator's options are made from the command line: for the
// hosting agent and the head (through Decide, launcher/config/plan.hpp) and for
// the daemon, `dlaunch coordinator` (DecideDaemon). The modes add only what they
// alone know: the endpoint they bound, a run id or token they made.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "envmap/layout.hpp"
#include "base/status.hpp"
#include "rendezvous/coordinator.hpp"
#include "rendezvous/connection.hpp"

namespace dlaunch::launcher {

struct Options;

// The job's size, restarts, master port (nullopt: each node offers one) and
// token as given; the timeouts and the hang watch from `o`. The result still
// needs rendezvous::Validate.
rendezvous::CoordinatorOptions CoordinatorOptionsFor(const Options& o, std::optional<int> master_port,
                                                     const std::string& run_id, int min_nodes, int max_nodes,
                                                     int max_restarts, const std::string& token);

// The rendezvous secret: --rdzv-token, else DLAUNCH_RDZV_TOKEN, else
// --rdzv-token-file; "" when none is set. Fails naming the bad source.
Result<std::string> ResolveToken(const Options& o, const envmap::EnvMap& env);

// `dlaunch coordinator --listen ADDR:PORT [--rdzv-token T | --rdzv-token-file F]
// [--rdzv-conf ...]`.
struct DaemonPlan {
  bool help = false;
  rendezvous::HostPort listen;
  // Every job's timeouts and token; a job's run id, size, restarts and hang watch
  // come from its first authenticated join (JobFor).
  rendezvous::CoordinatorOptions jobs;
  std::optional<rendezvous::HostPort> metrics;  // --metrics-addr (DLAUNCH_METRICS_ADDR); none: no metrics
};

// Usage of `dlaunch coordinator`, ending with its example.
std::string DaemonUsage();

// Parses the words after "coordinator". The flags are a few of the launcher's,
// parsed by its parser, so that spelling, PET_ defaults and messages are the
// same; the rest are refused, naming the flag.
Result<DaemonPlan> DecideDaemon(const std::vector<std::string>& args, const envmap::EnvMap& env);

// The options of the job a Hello asks for: `plan.jobs` with its run id, size,
// restarts and hang watch (--hang-timeout, --hang-action). The result still
// needs rendezvous::Validate (a negative hang timeout fails it).
rendezvous::CoordinatorOptions JobFor(const DaemonPlan& plan, const rendezvous::Hello& hello);

}  // namespace dlaunch::launcher
