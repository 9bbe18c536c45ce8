// A coordinator holds one descriptor per agent, so its RLIMIT_NOFILE caps the
// agents of its jobs. These read and raise that limit.
//
// `dlaunch coordinator` raises its soft limit to the hard limit at start (it runs
// no workers). A hosting dlaunch leaves it alone unless its job needs more (the
// server raises it then, server.hpp), so that the workers it starts inherit the
// limit they would have had anyway.
#pragma once

#include <cstdint>
#include <string>

namespace dlaunch::rendezvous {

// Descriptors a coordinator process keeps for things other than agents: stdio,
// epoll, timers, the listener, the console, the live view, slack.
inline constexpr std::uint64_t kFdsNotForAgents = 32;

struct FdLimit {
  std::uint64_t soft = 0;  // RLIM_INFINITY reads as 2^30
  std::uint64_t hard = 0;
};

// The limits in force; {1024, 1024} when getrlimit fails.
FdLimit CurrentFdLimit();
// Raises the soft limit to the hard one; returns the limits now in force (the
// old ones when setrlimit fails).
FdLimit RaiseFdLimit();
// How many agents a coordinator can hold under `limit`'s soft limit.
std::uint64_t AgentsAllowed(const FdLimit& limit);
// The line to say when a job of up to `max_nodes` agents does not fit `limit`
// (already raised as far as it goes), else "": "rendezvous HOST:PORT: job 'x'
// may have up to 30000 agents, but the descriptor limit allows about 19968
// (RLIMIT_NOFILE 20000, its hard limit); raise the hard limit (ulimit -Hn,
// systemd's LimitNOFILE=) for more".
std::string FdShortage(const std::string& subject, const std::string& run_id, int max_nodes, const FdLimit& limit);

}  // namespace dlaunch::rendezvous
