#include "launcher/watchdog/watch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "launcher/watchdog/job_mark.hpp"
#include "launcher/watchdog/proc_table.hpp"

namespace dlaunch::launcher {

std::vector<std::string> WatchArgs(const WatchOrders& orders) {
  return {std::to_string(orders.launcher_group), orders.cleanup_dir, orders.cleanup_file};
}

Result<WatchOrders> ParseWatchArgs(const std::vector<std::string>& args) {
  if (args.size() != 3)
    return Status::InvalidArgument(
        fmt::format("dlaunch-watch: {} arguments, expected 3 (GROUP DIR FILE; dlaunch starts it)", args.size()));
  WatchOrders orders;
  const std::string& group = args[0];
  auto [end, ec] = std::from_chars(group.data(), group.data() + group.size(), orders.launcher_group);
  if (ec != std::errc() || end != group.data() + group.size() || orders.launcher_group <= 0)
    return Status::InvalidArgument(fmt::format("dlaunch-watch: process group '{}' is not a positive number", group));
  orders.cleanup_dir = args[1];
  orders.cleanup_file = args[2];
  return orders;
}

std::string WatchMarkRecord(const WatchRecord& record) {
  uint32_t size = static_cast<uint32_t>(record.challenge.size() + record.mark_entry.size());
  std::string bytes(reinterpret_cast<const char*>(&size), sizeof size);
  bytes.append(record.challenge);
  bytes.append(record.mark_entry);
  return bytes;
}

std::string WatchAnswer(std::string_view challenge) {
  std::string answer(1, kWatchAck);
  answer.append(challenge);
  return answer;
}

namespace {

// Reads exactly `size` bytes; false on EOF or an error first (errno 0 for EOF).
bool ReadExactly(int fd, char* to, size_t size) {
  while (size > 0) {
    ssize_t n = read(fd, to, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = 0;
      return false;
    }
    to += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Result<WatchRecord> ReadWatchMark(int fd) {
  uint32_t size = 0;
  auto failed = [](const char* what) {
    return Status::Io(fmt::format("dlaunch-watch: orders on stdin: {} ({})", what,
                                  errno == 0 ? "end of input" : std::strerror(errno)));
  };
  if (!ReadExactly(fd, reinterpret_cast<char*>(&size), sizeof size)) return failed("no job mark");
  if (size < kWatchChallengeSize || size - kWatchChallengeSize > kMaxMarkEntry)
    return Status::Io(fmt::format("dlaunch-watch: orders on stdin: a record of {} bytes ({} to {}; dlaunch starts it)",
                                  size, kWatchChallengeSize, kWatchChallengeSize + kMaxMarkEntry));
  std::string bytes(size, '\0');
  if (!ReadExactly(fd, bytes.data(), size)) return failed("the job mark cut short");
  return WatchRecord{bytes.substr(0, kWatchChallengeSize), bytes.substr(kWatchChallengeSize)};
}

int WatchMain(const std::vector<std::string>& args) {
  Result<WatchOrders> orders = ParseWatchArgs(args);
  if (!orders.ok()) {
    std::fprintf(stderr, "%s\n", orders.status().message().c_str());
    return 2;
  }
  Result<WatchRecord> record = ReadWatchMark(0);
  if (!record.ok()) {
    std::fprintf(stderr, "%s\n", record.status().message().c_str());
    return 2;
  }
  orders->mark_entry = record->mark_entry;
  RunWatch(0, *orders);
}

void RunWatch(int fd, const WatchOrders& orders) {
  // Its own process group: a SIGKILL to the launcher's group (a head-node
  // launch stopping a local agent) must leave the watchdog to clean up after it.
  setpgid(0, 0);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE}) signal(sig, SIG_IGN);
  prctl(PR_SET_NAME, kWatchProgramName);
  // The orders' pipe on stdout or stderr (a launcher started with them closed)
  // must not be overwritten by /dev/null below.
  if (fd == 1 || fd == 2) fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int null = open("/dev/null", O_RDWR);
  for (int std_fd = fd == 0 ? 1 : 0; std_fd <= 2; ++std_fd) dup2(null, std_fd);
  if (null > 2) close(null);

  std::set<int> groups;
  std::map<int, uint64_t> processes;
  WatchMessage m{};
  for (;;) {
    ssize_t n = read(fd, &m, sizeof m);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof m)) break;  // EOF: the launcher is gone
    switch (m.op) {
      case WatchOp::kStop:
        _exit(0);  // orderly exit
      case WatchOp::kAddGroup:
        groups.insert(m.id);
        break;
      case WatchOp::kRemoveGroup:
        groups.erase(m.id);
        break;
      case WatchOp::kAddProcess:
        processes[m.id] = m.start_time;
        break;
      case WatchOp::kRemoveProcess:
        processes.erase(m.id);
        break;
    }
  }
  // The launcher's children are reparented to init (or may still be on their
  // way), so they are found by the pids registered while it lived, and their
  // own children by the tree below them, all collected before any is killed
  // (a killed parent's children would leave the tree). A process forked
  // between this read and the kill escapes unless it is in a killed group.
  std::vector<ProcStat> table = ReadProcessTable();
  std::map<int, int> group_of;
  for (const ProcStat& p : table) group_of[p.pid] = p.pgid;
  std::map<int, int> victims;  // pid -> pgid
  for (const ProcStat& p : table) {
    auto it = processes.find(p.pid);
    if (it == processes.end() || it->second != p.start_time) continue;
    victims[p.pid] = p.pgid;
    for (int d : Descendants(table, p.pid, getpid())) victims[d] = group_of[d];
  }
  for (auto [victim, group] : victims) {
    kill(victim, SIGKILL);
    if (group > 1 && group != orders.launcher_group && group != getpid()) kill(-group, SIGKILL);
  }
  for (int g : groups)
    if (g > 1) kill(-g, SIGKILL);  // kill(-1) would be every process this user may signal
  // What the launcher had no time to register: every process started below a
  // worker carries the mark, wherever it was reparented by now.
  if (!orders.mark_entry.empty()) KillMarked(orders.mark_entry, getpid());
  if (!orders.cleanup_dir.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(orders.cleanup_dir, ignored);
  }
  if (!orders.cleanup_file.empty()) unlink(orders.cleanup_file.c_str());
  _exit(0);
}

}  // namespace dlaunch::launcher
