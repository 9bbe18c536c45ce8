// Checks on real processes that the process/ unit tests share (adopted_test,
// job_mark_test), so that each does not keep its own copy.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "launcher/process/adopted.hpp"

namespace dlaunch::testing {

// True when `pid` (started at `start`) is gone or a zombie within `limit`.
inline bool GoneWithin(int pid, uint64_t start, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    dlaunch::Result<launcher::ProcStat> s = launcher::ReadStat(pid);
    if (!s.ok() || s->start_time != start) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

inline bool Contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace dlaunch::testing
