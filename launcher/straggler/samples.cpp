#include "launcher/straggler/samples.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "launcher/core/text.hpp"

namespace dlaunch::launcher {
namespace {

// A count: decimal digits only, at most kMaxSampleCount (no overflow when summed).
std::optional<std::int64_t> Count(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end != s.data() + s.size() || n < 0 || n > kMaxSampleCount) return std::nullopt;
  return n;
}

bool GoodKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxSampleKey) return false;
  for (unsigned char c : key)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

Status LineError(int number, std::string_view expected, std::string_view line) {
  return Status::InvalidArgument(
      fmt::format("line {}: expected '{}', got '{}'", number, expected, PrintablePrefix(line, 80)));
}

}  // namespace

Result<RankSamples> ParseSamples(std::string_view text) {
  if (text.size() > kMaxSamplesFile)
    return Status::InvalidArgument(fmt::format("{} bytes, over the cap of {}", text.size(), kMaxSamplesFile));
  RankSamples out;
  std::int64_t* fields[] = {&out.period_ms,   &out.ticks,  &out.late,   &out.late_ms,
                            &out.max_late_ms, &out.cpu_us, &out.wall_ms};
  constexpr std::string_view kNames[] = {"period_ms", "ticks", "late", "late_ms", "max_late_ms", "cpu_us", "wall_ms"};
  int number = 0;
  bool header = false;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++number;
    if (!header) {
      if (line != "dlaunch-samples 1") return LineError(number, "dlaunch-samples 1", line);
      header = true;
      continue;
    }
    if (line.empty()) continue;
    size_t sp = line.find(' ');
    std::string_view name = line.substr(0, sp);
    std::string_view rest = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
    if (name == "user" || name == "top") {
      size_t sp2 = rest.find(' ');
      std::optional<std::int64_t> n = Count(rest.substr(0, sp2));
      std::string_view key = sp2 == std::string_view::npos ? std::string_view() : rest.substr(sp2 + 1);
      if (!n || !GoodKey(key)) return LineError(number, fmt::format("{} N KEY", name), line);
      FrameCounts& counts = name == "user" ? out.user : out.top;
      auto it = counts.find(key);
      if (it == counts.end()) {
        if (counts.size() >= kMaxSampleKeys)
          return Status::InvalidArgument(fmt::format("line {}: more than {} '{}' keys", number, kMaxSampleKeys, name));
        counts.emplace(std::string(key), *n);
      } else {
        if (it->second > kMaxSampleCount - *n)
          return Status::InvalidArgument(
              fmt::format("line {}: '{}' counts over {} in all", number, name, kMaxSampleCount));
        it->second += *n;
      }
      continue;
    }
    bool known = false;
    for (size_t i = 0; i < std::size(kNames); ++i) {
      if (name != kNames[i]) continue;
      std::optional<std::int64_t> n = Count(rest);
      if (!n) return LineError(number, fmt::format("{} N", name), line);
      *fields[i] = *n;
      known = true;
    }
    // An unknown field is skipped: a newer hook may say more.
    (void)known;
  }
  if (!header) return Status::InvalidArgument("empty: expected 'dlaunch-samples 1'");
  return out;
}

namespace {

bool WentDown(const FrameCounts& now, const FrameCounts& before) {
  for (const auto& [key, n] : before) {
    auto it = now.find(key);
    if (it == now.end() ? n > 0 : it->second < n) return true;
  }
  return false;
}

FrameCounts Less(const FrameCounts& now, const FrameCounts& before) {
  FrameCounts out;
  for (const auto& [key, n] : now) {
    auto it = before.find(key);
    std::int64_t d = n - (it == before.end() ? 0 : it->second);
    if (d > 0) out.emplace(key, d);
  }
  return out;
}

}  // namespace

std::chrono::milliseconds SampleFlush(std::chrono::milliseconds window) {
  return std::chrono::milliseconds(std::clamp<std::int64_t>(window.count() / 4, 500, 5000));
}

RankSamples SamplesSince(const RankSamples& now, const RankSamples& before) {
  bool restarted = now.period_ms != before.period_ms || now.ticks < before.ticks || now.late < before.late ||
                   now.late_ms < before.late_ms || now.cpu_us < before.cpu_us || now.wall_ms < before.wall_ms ||
                   WentDown(now.user, before.user) || WentDown(now.top, before.top);
  if (restarted) return now;
  RankSamples d;
  d.period_ms = now.period_ms;
  d.ticks = now.ticks - before.ticks;
  d.late = now.late - before.late;
  d.late_ms = now.late_ms - before.late_ms;
  d.max_late_ms = now.max_late_ms;
  d.cpu_us = now.cpu_us - before.cpu_us;
  d.wall_ms = now.wall_ms - before.wall_ms;
  d.user = Less(now.user, before.user);
  d.top = Less(now.top, before.top);
  return d;
}

}  // namespace dlaunch::launcher
