// --health-check CMD, --health-check-timeout SECONDS, --health-check-interval
// SECONDS: a rendezvous node's check of itself before it joins
// (launcher/health/health_gate.hpp runs it). The flag table's setters only
// validate, with these functions; HealthCheckFor reads the flags typed into
// the one struct the node's plan holds.
#pragma once

#include <chrono>
#include <string>

#include "base/defaults.hpp"
#include "base/status.hpp"

namespace dlaunch::launcher {

struct Options;

struct HealthCheckPlan {
  std::string command;  // for /bin/sh -c; empty: no check, and nothing changes
  std::chrono::milliseconds timeout{base::kDefaultHealthCheckTimeout};    // Default: 60s
  std::chrono::milliseconds interval{base::kDefaultHealthCheckInterval};  // Default: 300s

  bool enabled() const { return !command.empty(); }
};

// The setters' checks: InvalidArgument with one line naming the flag, e.g.
// "--health-check-timeout: expected seconds from 1 to 2592000, got 'x'".
Status CheckHealthCommand(const std::string& value);
Status CheckHealthSeconds(const std::string& flag, const std::string& value);

// The flags as typed (the last of each wins). Fails when a timeout or an
// interval comes without --health-check, which alone would do nothing.
Result<HealthCheckPlan> HealthCheckFor(const Options& typed);

// --explain's line for it: "health check: 'df ...' before joining (timeout
// 60s; again every 300s while held out, and before a restart)"; "" when none.
std::string ExplainHealthCheck(const HealthCheckPlan& plan);

}  // namespace dlaunch::launcher
