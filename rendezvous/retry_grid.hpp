// When an agent that its host refused tries again.
//
// At scale agents start before their host and wait for it, and the job waits
// for the last of them to notice it is up. If each agent kept a rhythm of its
// own, that last agent would be nearly a whole pause behind the host, and every
// agent would pay a wakeup for each try: the two costs of a shorter pause and a
// longer one pull apart. So every agent of a job tries at the same moments, the
// ticks of a grid of `period` laid on the wall clock (NTP keeps the nodes of a
// cluster within milliseconds of each other), each up to `spread` late at random
// so that the host is not met by all of them at once. The host is then reached
// by all of them within one spread of the first tick after it came up: half a
// pause on average, not nearly a whole one, for the same number of tries. Where
// the clocks disagree the ticks fall apart, which is what a rhythm of one's own
// would have given.
#pragma once

#include <chrono>

namespace dlaunch::rendezvous {

// How far apart the ticks are for a job of at most `max_nodes` agents: 250us
// an agent, so that a host that is not up yet answers about 4,000 refused tries
// a second whatever the job's size (1,024 agents: 256ms), and 25ms at least,
// so that an agent tries at most 40 times a second; 2s at most (8,000 agents
// and up). A short period is what a small job waits for: its host is found
// half a period after it came up, on average, and a small job's whole start is
// a few tens of milliseconds (bench/profile/agent.md).
std::chrono::milliseconds RetryPeriod(int max_nodes);

// The period for an agent that has waited `waited` since it started: `period`
// for its first 2s, then the least multiple of it that is 100ms or more, so
// that a long wait (a host whose node is still booting) costs an agent at most
// ten tries a second. Every tick of the longer period is one of the shorter
// period's too, so agents early and late in their wait still try together.
std::chrono::nanoseconds PatientPeriod(std::chrono::milliseconds period, std::chrono::nanoseconds waited);

struct RetryGrid {
  std::chrono::nanoseconds period;
  std::chrono::nanoseconds spread;
};

// The grid of a job of at most `max_nodes` agents whose ticks are `period`
// apart (RetryPeriod, then PatientPeriod). The spread gives the host
// 20us for each of the first 4,096 agents, which the kernel's accept queue
// holds, and 100us for each one past them, about the rate at which a
// coordinator joins agents (bench/rdzv.sh's load rows); 2ms at least, half the
// period at most.
RetryGrid GridFor(std::chrono::nanoseconds period, int max_nodes);

// From wall-clock time `wall` (since the epoch), how long until the next try:
// the next tick after `wall`, plus `late` (0 to 1) of the spread.
std::chrono::nanoseconds UntilNextTry(const RetryGrid& grid, std::chrono::nanoseconds wall, double late);

}  // namespace dlaunch::rendezvous
