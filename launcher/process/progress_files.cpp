#include "launcher/process/progress_files.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "launcher/core/small_file.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {
namespace {

// How much of a refused file's text a warning quotes.
constexpr std::size_t kQuotedBytes = 32;

bool Blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

ProgressRead Refused(const std::string& path, std::string what) {
  return ProgressRead{ProgressRead::Kind::kRefused, -1, fmt::format("progress file {}: {}", path, what)};
}

}  // namespace

ProgressText ParseProgress(std::string_view text) {
  if (text.size() > kProgressFileBytes) return {ProgressText::Kind::kJunk, -1};
  size_t begin = 0;
  size_t end = text.size();
  while (begin < end && Blank(text[begin])) ++begin;
  while (end > begin && Blank(text[end - 1])) --end;
  if (begin == end) return {};
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::int64_t value = 0;
  for (size_t i = begin; i < end; ++i) {
    char c = text[i];
    if (c < '0' || c > '9') return {ProgressText::Kind::kJunk, -1};
    int digit = c - '0';
    if (value > (kMax - digit) / 10) return {ProgressText::Kind::kJunk, -1};
    value = value * 10 + digit;
  }
  return {ProgressText::Kind::kNumber, value};
}

ProgressRead ReadProgressFile(const std::string& path) {
  // One byte past the limit tells a file that is too long from one that fits.
  Result<std::optional<std::string>> read = ReadFilePrefix(path, kProgressFileBytes + 1);
  // What is there instead of a file is ignored; the system's errors say so.
  if (!read.ok())
    return Refused(path, read.status().code() == Code::kInvalidArgument
                             ? fmt::format("ignored ({})", read.status().message())
                             : read.status().message());
  if (!read->has_value()) return {};  // removed: nothing written in this generation
  std::string_view text = **read;
  if (text.size() > kProgressFileBytes)
    return Refused(path, fmt::format("ignored '{}...' (more than {} bytes; expected a step number)",
                                     Printable(text.substr(0, kQuotedBytes)), kProgressFileBytes));
  ProgressText parsed = ParseProgress(text);
  switch (parsed.kind) {
    case ProgressText::Kind::kEmpty:
      return {};
    case ProgressText::Kind::kNumber:
      return {ProgressRead::Kind::kNumber, parsed.value, {}};
    case ProgressText::Kind::kJunk:
      break;
  }
  return Refused(path, fmt::format("ignored '{}' (expected a step number from 0 to {})",
                                   PrintablePrefix(text, kQuotedBytes), std::numeric_limits<std::int64_t>::max()));
}

ProgressFiles::ProgressFiles(std::string dir, int nproc, std::function<void(const std::string&)> warn)
    : dir_(std::move(dir)),
      warn_(std::move(warn)),
      ranks_(static_cast<size_t>(std::max(nproc, 0))),
      values_(ranks_.size(), -1) {}

std::string ProgressFiles::PathOf(int generation, int local_rank) const {
  return fmt::format("{}/progress-{}-{}", dir_, generation, local_rank);
}

std::string ProgressFiles::Prepare(int generation, int local_rank) {
  if (local_rank < 0 || static_cast<size_t>(local_rank) >= ranks_.size()) return {};
  Rank& r = ranks_[static_cast<size_t>(local_rank)];
  values_[static_cast<size_t>(local_rank)] = -1;
  r.warned = false;
  if (!r.path.empty()) unlink(r.path.c_str());  // the last generation's; gone already is fine
  r.generation = generation;
  r.path = PathOf(generation, local_rank);
  // Nothing is made: the worker creates the file when it first writes, and
  // most never do. A file made here would be an inode created and removed for
  // every worker of every job (bench/profile/agent.md). Whatever an earlier
  // start of this generation left at the path (a file, a link, a FIFO) goes.
  if (unlink(r.path.c_str()) != 0 && errno != ENOENT) {
    if (warn_)
      warn_(fmt::format("progress file {}: cannot clear ({}); local rank {} runs without {}", r.path,
                        std::strerror(errno), local_rank, kProgressFileVar));
    r.path.clear();
    return {};
  }
  return r.path;
}

std::vector<std::int64_t> ProgressFiles::Read() {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    if (r.path.empty()) continue;
    ProgressRead read = ReadProgressFile(r.path);
    if (read.kind == ProgressRead::Kind::kNumber) {
      values_[i] = std::max(values_[i], read.value);
    } else if (read.kind == ProgressRead::Kind::kRefused && !r.warned) {
      r.warned = true;
      if (warn_) warn_(read.why);
    }
  }
  return values_;
}

std::vector<std::pair<int, std::int64_t>> ProgressByRank(ProgressFiles& files, const envmap::JobLayout& layout) {
  std::vector<std::int64_t> values = files.Read();
  std::vector<envmap::WorkerSlot> slots = envmap::LocalSlots(layout);
  std::vector<std::pair<int, std::int64_t>> out;
  for (size_t i = 0; i < values.size() && i < slots.size(); ++i)
    if (values[i] >= 0) out.emplace_back(slots[i].rank, values[i]);
  return out;
}

}  // namespace dlaunch::launcher
