// The live rows of `dlaunch status`: one JSON object per local rank, from what
// the worker group knows (its record, its last line) and what /proc says of the
// process. Reading /proc goes through a UsageReader, so tests fake it and the clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "launcher/core/output.hpp"
#include "launcher/process/supervisor.hpp"

namespace dlaunch::launcher {

// What /proc says of one process: `state` is '\0' when it has gone.
struct ProcUsage {
  char state = '\0';
  uint64_t cpu_ticks = 0;  // user + system, every thread of the process
  int64_t rss_kib = 0;
};
// Reads /proc/PID/stat and /proc/PID/statm: two small reads of files the kernel
// writes from memory, so it never waits on a disk or another process.
ProcUsage ReadUsage(int pid);

// What the group knows of one rank, for its row.
struct RankFacts {
  int rank = 0;
  int local_rank = 0;  // as told (LOCAL_RANK)
  int node_rank = 0;
  std::string host;
  int restarts = 0;                      // the job's restarts before this run, plus the worker's own
  const WorkerRecord* worker = nullptr;  // null: not started
  const LastLine* last = nullptr;        // the stream that wrote last; null: none yet
  bool held = false;                     // the console holds its output back: not silent
  std::string role = "default";          // ROLE_NAME: its group's, with several programs
};

class WorkerRows {
 public:
  using UsageReader = std::function<ProcUsage(int pid)>;
  // `ranks`: how many local ranks; `ticks_per_second`: of cpu_ticks (_SC_CLK_TCK).
  explicit WorkerRows(size_t ranks, UsageReader read = ReadUsage, double ticks_per_second = ClockTicks());

  // The row of local rank `i` at `now` (WorkerRun::Rows lists the fields). CPU %
  // is the share since the previous reading of the same process, when that is
  // at least 200 ms old, else over the process's life. Without `read_proc` a live
  // worker is "running" with cpu_pct and rss_kib 0, and /proc is not read.
  boost::json::object Row(size_t i, const RankFacts& facts, Clock::time_point now, bool read_proc = true);

  static double ClockTicks();

 private:
  // Per local rank, the last CPU reading.
  struct CpuSample {
    int pid = 0;
    uint64_t ticks = 0;
    Clock::time_point at;
  };
  void Running(boost::json::object& row, size_t i, const WorkerRecord& w, Clock::time_point now);

  UsageReader read_;
  double ticks_per_second_;
  std::vector<CpuSample> cpu_;
};

}  // namespace dlaunch::launcher
