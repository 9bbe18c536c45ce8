// Slurm's compressed lists (detect.hpp): host names, "gpu[001-004,007],cpu01",
// and per-node task counts, "2(x3),1". Both come from the environment of a
// Slurm job and are bounded before anything is made from them.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "base/defaults.hpp"
#include "envmap/detect.hpp"

namespace dlaunch::envmap {

namespace {

// The largest number in a bracket group: Slurm's node numbers are 32-bit.
constexpr uint64_t kMaxHostNumber = 4294967295;
// A longer name is no DNS name; the cap also bounds the expansion's memory.
constexpr size_t kMaxHostName = 255;

struct Range {
  uint64_t lo = 0, hi = 0;
  size_t width = 0;  // of the low end as written: "[09-10]" keeps "09"
};

// One host pattern, "r[1-2]n[1,4]": text[0] group[0] text[1] ... group[n-1] text[n].
struct Pattern {
  std::vector<std::string> text;
  std::vector<std::vector<Range>> groups;
};

Result<Range> ParseRange(std::string_view range, std::string_view whole) {
  size_t dash = range.find('-');
  std::string_view lo = range.substr(0, dash);
  std::string_view hi = dash == std::string_view::npos ? lo : range.substr(dash + 1);
  Range r{0, 0, lo.size()};
  auto ra = std::from_chars(lo.data(), lo.data() + lo.size(), r.lo);
  auto rb = std::from_chars(hi.data(), hi.data() + hi.size(), r.hi);
  bool whole_numbers = !lo.empty() && !hi.empty() && ra.ptr == lo.data() + lo.size() && rb.ptr == hi.data() + hi.size();
  if (whole_numbers && (ra.ec == std::errc::result_out_of_range || rb.ec == std::errc::result_out_of_range ||
                        r.lo > kMaxHostNumber || r.hi > kMaxHostNumber))
    return Status::InvalidArgument(
        fmt::format("bad range '{}' in '{}' (a number over {})", range, Shown(whole), kMaxHostNumber));
  if (!whole_numbers || ra.ec != std::errc() || rb.ec != std::errc() || r.hi < r.lo)
    return Status::InvalidArgument(fmt::format("bad range '{}' in '{}'", range, Shown(whole)));
  return r;
}

Result<Pattern> ParsePattern(std::string_view pattern, std::string_view whole) {
  Pattern p;
  for (;;) {
    size_t open = pattern.find('[');
    std::string_view text = pattern.substr(0, open);
    if (text.find(']') != std::string_view::npos)
      return Status::InvalidArgument(fmt::format("unbalanced ']' in '{}'", Shown(whole)));
    p.text.emplace_back(text);
    if (open == std::string_view::npos) return p;
    size_t close = pattern.find(']', open);
    if (close == std::string_view::npos)
      return Status::InvalidArgument(fmt::format("unbalanced '[' in '{}'", Shown(whole)));
    std::vector<Range>& group = p.groups.emplace_back();
    std::string_view body = pattern.substr(open + 1, close - open - 1);
    size_t start = 0;
    for (;;) {
      size_t comma = body.find(',', start);
      Result<Range> r = ParseRange(body.substr(start, comma == std::string_view::npos ? comma : comma - start), whole);
      if (!r.ok()) return r.status();
      group.push_back(*r);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    pattern = pattern.substr(close + 1);
  }
}

// How many hosts `p` gives, saturating at UINT64_MAX, and its longest name.
uint64_t Count(const Pattern& p, size_t& longest) {
  uint64_t count = 1;
  longest = 0;
  for (const std::string& t : p.text) longest += t.size();
  for (const std::vector<Range>& group : p.groups) {
    uint64_t n = 0;
    size_t widest = 0;
    for (const Range& r : group) {
      if (__builtin_add_overflow(n, r.hi - r.lo + 1, &n)) n = UINT64_MAX;
      widest = std::max({widest, r.width, fmt::formatted_size("{}", r.hi)});
    }
    if (__builtin_mul_overflow(count, n, &count)) count = UINT64_MAX;
    longest += widest;
  }
  return count;
}

// Appends every host of `p`, the last group varying fastest (Slurm's order). An
// odometer rather than recursion: a list of thousands of groups must not
// exhaust the stack.
void Expand(const Pattern& p, std::vector<std::string>& out) {
  size_t n = p.groups.size();
  std::vector<size_t> range(n, 0);
  std::vector<uint64_t> value(n);
  for (size_t g = 0; g < n; ++g) value[g] = p.groups[g][0].lo;
  for (;;) {
    std::string host = p.text[0];
    for (size_t g = 0; g < n; ++g) host += fmt::format("{:0{}}", value[g], p.groups[g][range[g]].width) + p.text[g + 1];
    out.push_back(std::move(host));
    size_t g = n;
    for (;;) {
      if (g == 0) return;  // the first group carried over: done
      --g;
      const std::vector<Range>& group = p.groups[g];
      if (value[g] < group[range[g]].hi) {
        ++value[g];
        break;
      }
      if (range[g] + 1 < group.size()) {
        value[g] = group[++range[g]].lo;
        break;
      }
      range[g] = 0;
      value[g] = group[0].lo;
    }
  }
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(std::string_view list) {
  // Split on commas outside brackets, and count every host before making any.
  std::vector<Pattern> patterns;
  uint64_t total = 0;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '[') ++depth;
    if (i < list.size() && list[i] == ']') --depth;
    if (depth < 0) return Status::InvalidArgument(fmt::format("unbalanced ']' in '{}'", Shown(list)));
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      std::string_view one = list.substr(start, i - start);
      if (one.empty()) return Status::InvalidArgument(fmt::format("empty host in '{}'", Shown(list)));
      Result<Pattern> p = ParsePattern(one, list);
      if (!p.ok()) return p.status();
      size_t longest = 0;
      uint64_t count = Count(*p, longest);
      if (__builtin_add_overflow(total, count, &total)) total = UINT64_MAX;
      if (longest > kMaxHostName)
        return Status::InvalidArgument(fmt::format("'{}' makes a host name of {} bytes, over the limit of {}",
                                                   Shown(list), longest, kMaxHostName));
      patterns.push_back(std::move(*p));
      start = i + 1;
    }
  }
  if (depth != 0) return Status::InvalidArgument(fmt::format("unbalanced '[' in '{}'", Shown(list)));
  if (total == UINT64_MAX)
    return Status::InvalidArgument(fmt::format("'{}' expands to more than {} hosts", Shown(list), kMaxHosts));
  if (total > kMaxHosts)
    return Status::InvalidArgument(
        fmt::format("'{}' expands to {} hosts, over the limit of {}", Shown(list), total, kMaxHosts));
  std::vector<std::string> hosts;
  hosts.reserve(total);
  for (const Pattern& p : patterns) Expand(p, hosts);
  return hosts;
}

std::optional<int> TasksOnNode(std::string_view counts, int node) {
  int64_t index = 0;  // a sum of ints: "2(x2147483647),1" must not wrap
  size_t start = 0;
  while (start <= counts.size()) {
    size_t comma = counts.find(',', start);
    std::string_view item =
        counts.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    int n = 0, times = 1;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
    if (item.empty() || ec != std::errc() || n < 1) return std::nullopt;
    std::string_view rest = item.substr(static_cast<size_t>(ptr - item.data()));
    if (!rest.empty()) {
      // "(xK)"
      if (rest.size() < 4 || !rest.starts_with("(x") || !rest.ends_with(")")) return std::nullopt;
      std::string_view k = rest.substr(2, rest.size() - 3);
      auto [kp, kec] = std::from_chars(k.data(), k.data() + k.size(), times);
      if (kec != std::errc() || kp != k.data() + k.size() || times < 1) return std::nullopt;
    }
    if (node < index + times) return n;
    index += times;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return std::nullopt;
}

}  // namespace dlaunch::envmap
