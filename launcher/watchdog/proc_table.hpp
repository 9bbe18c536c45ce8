// What /proc says about processes: the fields of a process's stat line, the
// whole table, the tree below a pid, this process's children. Read by the
// launcher (launcher/process/adopted.hpp) and by the watchdog after a SIGKILL of
// the launcher (launcher/watchdog/watch.hpp), which links nothing else.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace dlaunch::launcher {

// The fields of /proc/PID/stat that identify a process and place it in the tree.
struct ProcStat {
  int pid = 0;
  int ppid = 0;
  int pgid = 0;
  int sid = 0;
  char state = '?';
  uint64_t start_time = 0;  // clock ticks after boot: with pid, names one process for ever
};

// Parses the text of /proc/PID/stat. The command name may hold spaces and
// parentheses, so fields are counted from the last ')'. Returns InvalidArgument
// "/proc stat: ..." on text that is not a stat line.
Result<ProcStat> ParseStat(std::string_view text);

// Every process on the machine (those that vanish while being read are left
// out). Never fails: an unreadable /proc gives an empty list.
std::vector<ProcStat> ReadProcessTable();

// The pids of every descendant of `root` in `table` (not `root` itself), parents
// before children, leaving out `skip` and its descendants.
std::vector<int> Descendants(const std::vector<ProcStat>& table, int root, int skip = 0);

// The current stat of `pid`, or NotFound when it has gone (or is a zombie).
Result<ProcStat> ReadStat(int pid);

// The text of a /proc file, at most `limit` bytes; nullopt when it cannot be
// opened (the process has gone, is not ours to read, or the kernel has no such file).
std::optional<std::string> ReadProcFile(const std::string& path, size_t limit = size_t{256} << 10);

// A zombie, or a process on its way out: it holds a pid, and nothing else.
bool Gone(const ProcStat& p);

// The children of this process from /proc/self/task/*/children, or nullopt on
// kernels without CONFIG_PROC_CHILDREN, where the whole process table must be
// read instead.
std::optional<std::vector<int>> OwnChildren();

}  // namespace dlaunch::launcher
