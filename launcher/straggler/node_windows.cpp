#include "launcher/straggler/node_windows.hpp"

#include <unistd.h>

#include <algorithm>

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include "launcher/core/small_file.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

NodeWindows::NodeWindows(std::string dumps_dir, std::function<std::optional<RankSamples>(int pid)> native,
                         std::function<void(const std::string&)> warn)
    : dumps_dir_(std::move(dumps_dir)), native_(std::move(native)), warn_(std::move(warn)) {}

std::optional<RankSamples> NodeWindows::Read(int pid) {
  std::string path = fmt::format("{}/{}.samples", dumps_dir_, pid);
  Result<std::optional<std::string>> text = ReadSmallFile(path, kMaxSamplesFile);
  Result<RankSamples> parsed = Status::Ok();
  if (text.ok() && !text->has_value()) return native_ ? native_(pid) : std::nullopt;
  if (text.ok()) parsed = ParseSamples(**text);
  Status bad = text.ok() ? parsed.status() : text.status();
  if (!bad.ok()) {
    if (!std::exchange(warned_[pid], true)) warn_(fmt::format("straggler: ignoring {} ({})", path, bad.message()));
    return std::nullopt;
  }
  return *parsed;
}

std::vector<RankWindow> NodeWindows::Take(const std::vector<LocalRank>& ranks, int node_rank, const std::string& host) {
  std::map<int, RankSamples> now;
  std::vector<RankWindow> out;
  for (const LocalRank& r : ranks) {
    if (r.pid <= 0) continue;
    std::optional<RankSamples> s = Read(r.pid);
    if (!s) continue;
    auto it = before_.find(r.pid);
    RankWindow w;
    w.rank = r.rank;
    w.node_rank = node_rank;
    w.host = host;
    w.role = r.role;
    w.samples = it == before_.end() ? *s : SamplesSince(*s, it->second);
    now[r.pid] = std::move(*s);
    out.push_back(std::move(w));
  }
  // A pid that is gone is forgotten, and so is its file: a later process
  // given the same pid must not start from a dead one's counts.
  for (const auto& kv : before_) {
    int pid = kv.first;  // a copy: clang before 16 cannot capture a structured binding
    if (!now.count(pid) && std::none_of(ranks.begin(), ranks.end(), [&](const LocalRank& r) { return r.pid == pid; }))
      unlink(fmt::format("{}/{}.samples", dumps_dir_, pid).c_str());
  }
  before_ = std::move(now);
  // A pid no rank has any more is forgotten (pids are reused).
  std::erase_if(warned_, [&](const auto& kv) {
    return std::none_of(ranks.begin(), ranks.end(), [&](const LocalRank& r) { return r.pid == kv.first; });
  });
  last_ = out;
  return out;
}

namespace {

// The `keep` largest counts of `counts`, the rest summed under kOtherFrames
// (at most kMaxSampleCount, a count the other side takes).
boost::json::object Largest(const FrameCounts& counts, std::size_t keep) {
  std::vector<std::pair<std::string_view, std::int64_t>> v(counts.begin(), counts.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  boost::json::object o;
  std::int64_t rest = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i < keep && v[i].first != kOtherFrames) {
      o[v[i].first] = v[i].second;
    } else {
      rest = std::min(rest + v[i].second, kMaxSampleCount);
    }
  }
  if (rest > 0) o[kOtherFrames] = rest;
  return o;
}

std::optional<std::int64_t> Count(const boost::json::object& o, std::string_view key) {
  const boost::json::value* v = o.if_contains(key);
  if (v == nullptr) return std::nullopt;
  if (const std::int64_t* i = v->if_int64(); i != nullptr && *i >= 0) return *i;
  if (const std::uint64_t* u = v->if_uint64(); u != nullptr && *u <= INT64_MAX) return static_cast<std::int64_t>(*u);
  return std::nullopt;
}

Status ReadCounts(const boost::json::object& o, std::string_view name, FrameCounts& out) {
  const boost::json::value* v = o.if_contains(name);
  if (v == nullptr) return Status::Ok();
  const boost::json::object* m = v->if_object();
  if (m == nullptr || m->size() > kMaxSampleKeys)
    return Status::InvalidArgument(fmt::format("'{}' is not an object of at most {} keys", name, kMaxSampleKeys));
  for (const auto& kv : *m) {
    std::optional<std::int64_t> n = Count(*m, kv.key());
    if (!n || *n > kMaxSampleCount || kv.key().empty() || kv.key().size() > kMaxSampleKey)
      return Status::InvalidArgument(fmt::format("'{}' has a bad entry '{}'", name, PrintablePrefix(kv.key(), 64)));
    out[std::string(kv.key())] = *n;
  }
  return Status::Ok();
}

}  // namespace

std::string WindowItem(const RankWindow& w, std::size_t max_bytes) {
  for (std::size_t keep = kMaxWireKeys;; keep /= 2) {
    boost::json::object o{{"rank", w.rank},
                          {"node_rank", w.node_rank},
                          {"host", w.host},
                          {"role", w.role},
                          {"period_ms", w.samples.period_ms},
                          {"ticks", w.samples.ticks},
                          {"late", w.samples.late},
                          {"late_ms", w.samples.late_ms},
                          {"max_late_ms", w.samples.max_late_ms},
                          {"cpu_us", w.samples.cpu_us},
                          {"wall_ms", w.samples.wall_ms},
                          {"user", Largest(w.samples.user, keep)},
                          {"top", Largest(w.samples.top, keep)}};
    std::string item = boost::json::serialize(o);
    if (item.size() <= max_bytes || keep == 0) return item.size() <= max_bytes ? item : std::string();
  }
}

Result<RankWindow> WindowFromItem(std::string_view item) {
  boost::system::error_code ec;
  boost::json::parse_options opts;
  opts.max_depth = 4;
  boost::json::value v = boost::json::parse(item, ec, {}, opts);
  if (ec) return Status::InvalidArgument(fmt::format("not JSON: {}", ec.message()));
  const boost::json::object* o = v.if_object();
  if (o == nullptr) return Status::InvalidArgument("not a JSON object");
  RankWindow w;
  std::optional<std::int64_t> rank = Count(*o, "rank");
  if (!rank || *rank > INT32_MAX) return Status::InvalidArgument("no rank");
  w.rank = static_cast<int>(*rank);
  if (const boost::json::value* role = o->if_contains("role"); role != nullptr && role->is_string()) {
    if (role->as_string().size() > 64) return Status::InvalidArgument("role over 64 bytes");
    w.role = std::string(role->as_string());
  }
  std::pair<const char*, std::int64_t*> fields[] = {{"period_ms", &w.samples.period_ms},
                                                    {"ticks", &w.samples.ticks},
                                                    {"late", &w.samples.late},
                                                    {"late_ms", &w.samples.late_ms},
                                                    {"max_late_ms", &w.samples.max_late_ms},
                                                    {"cpu_us", &w.samples.cpu_us},
                                                    {"wall_ms", &w.samples.wall_ms}};
  for (auto& [name, field] : fields) {
    std::optional<std::int64_t> n = Count(*o, name);
    // Counts a window can hold, not a number that overflows a sum.
    if (!n || *n > kMaxSampleCount) return Status::InvalidArgument(fmt::format("bad '{}'", name));
    *field = *n;
  }
  if (Status s = ReadCounts(*o, "user", w.samples.user); !s.ok()) return s;
  if (Status s = ReadCounts(*o, "top", w.samples.top); !s.ok()) return s;
  return w;
}

}  // namespace dlaunch::launcher
