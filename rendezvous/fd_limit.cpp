#include "rendezvous/fd_limit.hpp"

#include <sys/resource.h>

#include <fmt/format.h>

#include "rendezvous/coordinator.hpp"

namespace dlaunch::rendezvous {
namespace {

std::uint64_t Finite(rlim_t v) { return v == RLIM_INFINITY ? std::uint64_t{1} << 30 : static_cast<std::uint64_t>(v); }

}  // namespace

FdLimit CurrentFdLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return {1024, 1024};
  return {Finite(rl.rlim_cur), Finite(rl.rlim_max)};
}

FdLimit RaiseFdLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return {1024, 1024};
  if (rl.rlim_cur != rl.rlim_max) {
    rlimit want = rl;
    want.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) rl = want;
  }
  return {Finite(rl.rlim_cur), Finite(rl.rlim_max)};
}

std::uint64_t AgentsAllowed(const FdLimit& limit) {
  return limit.soft > kFdsNotForAgents ? limit.soft - kFdsNotForAgents : 0;
}

std::string FdShortage(const std::string& subject, const std::string& run_id, int max_nodes, const FdLimit& limit) {
  std::uint64_t allowed = AgentsAllowed(limit);
  if (max_nodes < 0 || static_cast<std::uint64_t>(max_nodes) <= allowed) return "";
  return fmt::format(
      "{}: job {} may have up to {} agents, but the descriptor limit allows about {} (RLIMIT_NOFILE {}{}); "
      "raise the hard limit (ulimit -Hn, systemd's LimitNOFILE=) for more",
      subject, QuoteId(run_id), max_nodes, allowed, limit.soft,
      limit.soft == limit.hard ? ", its hard limit" : fmt::format(", hard limit {}", limit.hard));
}

}  // namespace dlaunch::rendezvous
