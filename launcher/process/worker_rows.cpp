#include "launcher/process/worker_rows.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "launcher/core/text.hpp"
#include "launcher/watchdog/proc_table.hpp"

namespace dlaunch::launcher {
namespace {

std::string ProcStateWord(char state) {
  switch (state) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping";
    case 'D':
      return "disk-wait";
    case 'T':
      return "stopped";
    case 't':
      return "traced";
    case 'Z':
      return "zombie";
    case 'I':
      return "idle";
    default:
      return "unknown";
  }
}

double RowSeconds(Clock::duration d) { return std::round(std::chrono::duration<double>(d).count() * 10) / 10; }

}  // namespace

ProcUsage ReadUsage(int pid) {
  ProcUsage u;
  std::string stat = ReadProcFile(fmt::format("/proc/{}/stat", pid), 4096).value_or("");
  // The command name may hold spaces and ')': the fields start after the last ')'.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return u;
  std::istringstream in(stat.substr(close + 1));
  std::string field;
  std::vector<std::string> f;  // f[0] is field 3 (state)
  while (f.size() < 13 && in >> field) f.push_back(field);
  if (f.size() < 13) return u;
  u.state = f[0][0];
  u.cpu_ticks = std::strtoull(f[11].c_str(), nullptr, 10) + std::strtoull(f[12].c_str(), nullptr, 10);
  std::istringstream statm(ReadProcFile(fmt::format("/proc/{}/statm", pid), 4096).value_or(""));
  int64_t size = 0, resident = 0;
  if (statm >> size >> resident) u.rss_kib = resident * (sysconf(_SC_PAGESIZE) / 1024);
  return u;
}

double WorkerRows::ClockTicks() { return static_cast<double>(sysconf(_SC_CLK_TCK)); }

WorkerRows::WorkerRows(size_t ranks, UsageReader read, double ticks_per_second)
    : read_(std::move(read)), ticks_per_second_(ticks_per_second), cpu_(ranks) {}

boost::json::object WorkerRows::Row(size_t i, const RankFacts& facts, Clock::time_point now, bool read_proc) {
  const WorkerRecord* w = facts.worker;
  boost::json::object row{
      {"rank", facts.rank},
      {"local_rank", facts.local_rank},
      {"node_rank", facts.node_rank},
      {"host", facts.host},
      {"role", facts.role},
      {"pid", 0},
      {"state", "not started"},
      {"run_time_s", 0.0},
      {"cpu_pct", 0.0},
      {"rss_kib", 0},
      {"restarts", facts.restarts},
  };
  // The worker's last line on either stream, and the silence since its last bytes
  // (or since it started, before any).
  const LastLine* last = facts.last;
  row["last_line"] = last != nullptr ? SafeUtf8(last->line(), false) : "";
  if (w == nullptr) {
    row["silent_s"] = 0.0;
    return row;
  }
  Clock::time_point since = last != nullptr ? std::max(*last->at(), w->started) : w->started;
  Clock::time_point end = w->running ? now : w->ended;
  if (w->running && facts.held) since = now;  // WorkerRun::last_output()
  row["run_time_s"] = RowSeconds(end - w->started);
  row["silent_s"] = RowSeconds(end - std::min(since, end));
  if (!w->running) {
    if (w->started != Clock::time_point{}) row["exit_code"] = w->status.ShellCode();
    row["state"] = w->started == Clock::time_point{} ? "not started"
                   : w->status.signal != 0           ? "killed (" + SignalName(w->status.signal) + ")"
                                                     : fmt::format("exited ({})", w->status.code);
    return row;
  }
  if (!read_proc) {
    row["pid"] = w->pid;
    row["state"] = "running";
    return row;
  }
  Running(row, i, *w, now);
  return row;
}

// The worker process itself, not its children (data-loader workers, a shell's
// child): summing a group means scanning the whole process table (every
// /proc/PID/stat on the machine; adopted.hpp's scans cost seconds of CPU an
// hour), and a status refresh every second must stay cheap.
void WorkerRows::Running(boost::json::object& row, size_t i, const WorkerRecord& w, Clock::time_point now) {
  ProcUsage u = read_(w.pid);
  row["pid"] = w.pid;
  row["state"] = u.state == '\0' ? "exiting" : ProcStateWord(u.state);
  row["rss_kib"] = u.rss_kib;
  CpuSample& c = cpu_[i];
  // Since the last reading of this same process, else over its whole life.
  bool again = c.pid == w.pid && now - c.at >= std::chrono::milliseconds(200);
  double ticks = static_cast<double>(u.cpu_ticks - (again ? std::min(c.ticks, u.cpu_ticks) : 0));
  double wall = std::chrono::duration<double>(now - (again ? c.at : w.started)).count();
  row["cpu_pct"] = wall > 0 ? std::round(ticks / ticks_per_second_ / wall * 1000) / 10 : 0.0;
  if (c.pid != w.pid || again) c = CpuSample{w.pid, u.cpu_ticks, now};
}

}  // namespace dlaunch::launcher
