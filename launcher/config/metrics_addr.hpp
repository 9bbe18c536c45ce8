// --metrics-addr HOST:PORT (or DLAUNCH_METRICS_ADDR, for containers): where a
// dlaunch serves /metrics, /healthz and /readyz (launcher/metrics/metrics.hpp).
// PORT alone binds loopback; port 0 takes any free port, which dlaunch then
// prints and writes to --events (metrics_listening).
#pragma once

#include <optional>
#include <string>

#include "envmap/layout.hpp"
#include "base/status.hpp"
#include "rendezvous/connection.hpp"

namespace dlaunch::launcher {

inline constexpr const char* kMetricsAddrEnvVar = "DLAUNCH_METRICS_ADDR";

// "9400" -> 127.0.0.1:9400; ":9400" the same; "ADDR:PORT" with an IPv4 address or
// localhost; "[V6]:PORT". The port is 0 to 65535. A host name is refused (its
// lookup could block the loop). InvalidArgument "WHAT TEXT: expected ADDR:PORT or
// PORT (...)"; `what` ends
// with its separator ("--metrics-addr ", "DLAUNCH_METRICS_ADDR=").
Result<rendezvous::HostPort> ParseMetricsAddr(const std::string& text, const std::string& what);
// `flag` (--metrics-addr) when given, else DLAUNCH_METRICS_ADDR from `env`;
// nullopt when neither is set (no metrics served).
Result<std::optional<rendezvous::HostPort>> MetricsAddrFor(const std::string& flag, const envmap::EnvMap& env);

}  // namespace dlaunch::launcher
