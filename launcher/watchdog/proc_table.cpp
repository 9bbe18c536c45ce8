#include "launcher/watchdog/proc_table.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <map>
#include <set>

#include <fmt/format.h>

namespace dlaunch::launcher {
namespace {

bool ParseNumber(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::optional<std::string> ReadProcFile(const std::string& path, size_t limit) {
  std::string out;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[16384];
  // Bounded: a /proc file of a live process ends, and `limit` caps one that keeps growing.
  while (out.size() < limit) {
    ssize_t n = read(fd, buf, std::min(sizeof buf, limit - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

bool Gone(const ProcStat& p) { return p.state == 'Z' || p.state == 'X'; }

Result<ProcStat> ParseStat(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(fmt::format("/proc stat: {} in '{}'", why, text.substr(0, 80)));
  };
  size_t open = text.find(" (");
  size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return bad("no command name");
  ProcStat s;
  uint64_t v = 0;
  if (!ParseNumber(text.substr(0, open), v) || v == 0 || v > INT32_MAX) return bad("bad pid");
  s.pid = static_cast<int>(v);
  // Fields after the command name, numbered as in proc(5): 3 is the state.
  std::vector<std::string_view> fields;
  std::string_view rest = text.substr(close + 1);
  while (!rest.empty() && fields.size() < 20) {
    size_t a = rest.find_first_not_of(" \n");
    if (a == std::string_view::npos) break;
    size_t b = rest.find_first_of(" \n", a);
    fields.push_back(rest.substr(a, b == std::string_view::npos ? std::string_view::npos : b - a));
    rest = b == std::string_view::npos ? std::string_view() : rest.substr(b);
  }
  if (fields.size() < 20) return bad("too few fields");
  if (fields[0].size() != 1) return bad("bad state");
  s.state = fields[0][0];
  auto field = [&](int n, int& out) {
    uint64_t x = 0;
    if (!ParseNumber(fields[static_cast<size_t>(n - 3)], x) || x > INT32_MAX) return false;
    out = static_cast<int>(x);
    return true;
  };
  if (!field(4, s.ppid) || !field(5, s.pgid) || !field(6, s.sid)) return bad("bad ppid, pgrp or session");
  if (!ParseNumber(fields[22 - 3], s.start_time)) return bad("bad start time");
  return s;
}

Result<ProcStat> ReadStat(int pid) {
  std::string text = ReadProcFile(fmt::format("/proc/{}/stat", pid)).value_or("");
  if (text.empty()) return Status::NotFound(fmt::format("process {}: gone", pid));
  Result<ProcStat> s = ParseStat(text);
  if (s.ok() && Gone(*s)) return Status::NotFound(fmt::format("process {}: gone (zombie)", pid));
  return s;
}

std::vector<ProcStat> ReadProcessTable() {
  std::vector<ProcStat> table;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return table;
  while (dirent* e = readdir(dir)) {
    uint64_t pid = 0;
    if (!ParseNumber(e->d_name, pid)) continue;
    std::string text = ReadProcFile(fmt::format("/proc/{}/stat", pid)).value_or("");
    if (Result<ProcStat> s = ParseStat(text); s.ok()) table.push_back(*s);
  }
  closedir(dir);
  return table;
}

std::vector<int> Descendants(const std::vector<ProcStat>& table, int root, int skip) {
  std::multimap<int, int> children;
  for (const ProcStat& p : table) children.emplace(p.ppid, p.pid);
  std::vector<int> out;
  std::vector<int> todo{root};
  std::set<int> seen{root};
  // Bounded by the table: each pid is visited once even if the table (read
  // while processes come and go) holds a cycle.
  while (!todo.empty()) {
    int parent = todo.back();
    todo.pop_back();
    auto [a, b] = children.equal_range(parent);
    for (auto it = a; it != b; ++it) {
      int child = it->second;
      if ((skip != 0 && child == skip) || !seen.insert(child).second) continue;
      out.push_back(child);
      todo.push_back(child);
    }
  }
  return out;
}

std::optional<std::vector<int>> OwnChildren() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return std::nullopt;
  std::vector<int> out;
  bool supported = true;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::string path = fmt::format("/proc/self/task/{}/children", e->d_name);
    std::optional<std::string> text = ReadProcFile(path);
    if (!text) {
      supported = false;
      break;
    }
    std::string_view rest(*text);
    while (!rest.empty()) {
      size_t a = rest.find_first_not_of(' ');
      if (a == std::string_view::npos) break;
      size_t b = rest.find(' ', a);
      uint64_t pid = 0;
      if (ParseNumber(rest.substr(a, b == std::string_view::npos ? std::string_view::npos : b - a), pid))
        out.push_back(static_cast<int>(pid));
      rest = b == std::string_view::npos ? std::string_view() : rest.substr(b);
    }
  }
  closedir(dir);
  if (!supported) return std::nullopt;
  return out;
}

}  // namespace dlaunch::launcher
