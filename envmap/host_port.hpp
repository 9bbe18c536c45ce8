// Internal to envmap: joins an address and a port the way gRPC (TF_CONFIG) and
// Azure's AZ_BATCH_MASTER_NODE readers split them.
#pragma once

#include <string>

#include <fmt/core.h>

namespace dlaunch::envmap {

// "10.0.0.1:2222"; an IPv6 literal is bracketed ("[fe80::1]:2222") because an
// unbracketed one cannot be split at its last colon unambiguously by every reader.
inline std::string JoinHostPort(const std::string& addr, int port) {
  bool bare_ipv6 = addr.find(':') != std::string::npos && addr.front() != '[';
  return bare_ipv6 ? fmt::format("[{}]:{}", addr, port) : fmt::format("{}:{}", addr, port);
}

}  // namespace dlaunch::envmap
