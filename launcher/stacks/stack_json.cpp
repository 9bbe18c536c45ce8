// A rank's stacks as JSON (stacks.hpp), as they travel from an agent to the
// node that reports the hang: ToJson cuts to the bounds, RankStackFromJson
// refuses what exceeds them, naming the field. The JSON comes from a peer, so
// every field is checked.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/json/array.hpp>
#include <boost/json/string.hpp>
#include <fmt/format.h>

#include "launcher/core/text.hpp"
#include "launcher/stacks/stacks.hpp"

namespace dlaunch::launcher {

namespace {

std::string Cut(std::string_view s, size_t max, bool keep_newlines) {
  return SafeUtf8(s.substr(0, max), keep_newlines);
}

// Field readers for RankStackFromJson: each fails naming `where`.
Result<std::string> TextField(const boost::json::object& o, std::string_view key, const std::string& where,
                              size_t max) {
  const boost::json::value* v = o.if_contains(key);
  if (v == nullptr) return std::string();
  const boost::json::string* s = v->if_string();
  if (s == nullptr) return Status::InvalidArgument(fmt::format("{}.{}: not a string", where, key));
  if (s->size() > max)
    return Status::InvalidArgument(fmt::format("{}.{}: {} bytes, more than {}", where, key, s->size(), max));
  return std::string(s->data(), s->size());
}

Result<int> IntField(const boost::json::object& o, std::string_view key, const std::string& where, int lo) {
  const boost::json::value* v = o.if_contains(key);
  if (v == nullptr) return Status::InvalidArgument(fmt::format("{}.{}: missing", where, key));
  std::optional<int64_t> n;
  if (const int64_t* i = v->if_int64())
    n = *i;
  else if (const uint64_t* u = v->if_uint64(); u != nullptr && *u <= uint64_t{INT32_MAX})
    n = static_cast<int64_t>(*u);
  if (!n || *n < lo || *n > INT32_MAX)
    return Status::InvalidArgument(fmt::format("{}.{}: not an integer from {} to {}", where, key, lo, INT32_MAX));
  return static_cast<int>(*n);
}

const boost::json::array* ArrayField(const boost::json::object& o, std::string_view key) {
  const boost::json::value* v = o.if_contains(key);
  return v == nullptr ? nullptr : v->if_array();
}

}  // namespace

boost::json::object ToJson(const RankStack& stack) {
  boost::json::array threads;
  for (size_t t = 0; t < stack.threads.size() && t < kMaxStackThreads; ++t) {
    const ThreadStack& ts = stack.threads[t];
    boost::json::array frames;
    for (size_t f = 0; f < ts.frames.size() && f < kMaxStackFrames; ++f) {
      const Frame& fr = ts.frames[f];
      frames.push_back(boost::json::object{{"function", Cut(fr.function, kMaxStackText, false)},
                                           {"file", Cut(fr.file, kMaxStackText, false)},
                                           {"line", std::max(fr.line, 0)}});
    }
    threads.push_back(boost::json::object{
        {"name", Cut(ts.name, kMaxStackText, false)}, {"main", ts.main}, {"frames", std::move(frames)}});
  }
  return boost::json::object{{"rank", std::max(stack.rank, 0)},
                             {"pid", std::max(stack.pid, 0)},
                             {"how", Cut(stack.how, kMaxStackText, false)},
                             {"error", Cut(stack.error, kMaxStackText, false)},
                             {"threads", std::move(threads)},
                             {"raw", Cut(stack.raw, kMaxStackRaw, true)}};
}

Result<RankStack> RankStackFromJson(const boost::json::value& v) {
  const boost::json::object* o = v.if_object();
  if (o == nullptr) return Status::InvalidArgument("stack: not an object");
  RankStack out;
  Result<int> rank = IntField(*o, "rank", "stack", 0);
  if (!rank.ok()) return rank.status();
  out.rank = *rank;
  std::string where = fmt::format("stack of rank {}", out.rank);
  Result<int> pid = IntField(*o, "pid", where, 0);
  if (!pid.ok()) return pid.status();
  out.pid = *pid;
  for (auto [key, field, max] :
       {std::tuple{"how", &out.how, kMaxStackText}, std::tuple{"error", &out.error, kMaxStackText},
        std::tuple{"raw", &out.raw, kMaxStackRaw}}) {
    Result<std::string> text = TextField(*o, key, where, max);
    if (!text.ok()) return text.status();
    *field = std::move(*text);
  }
  const boost::json::array* threads = ArrayField(*o, "threads");
  if (threads == nullptr) return Status::InvalidArgument(fmt::format("{}.threads: not an array", where));
  if (threads->size() > kMaxStackThreads)
    return Status::InvalidArgument(
        fmt::format("{}.threads: {}, more than {}", where, threads->size(), kMaxStackThreads));
  for (size_t t = 0; t < threads->size(); ++t) {
    std::string tw = fmt::format("{}.threads[{}]", where, t);
    const boost::json::object* to = (*threads)[t].if_object();
    if (to == nullptr) return Status::InvalidArgument(tw + ": not an object");
    ThreadStack ts;
    Result<std::string> name = TextField(*to, "name", tw, kMaxStackText);
    if (!name.ok()) return name.status();
    ts.name = std::move(*name);
    if (const boost::json::value* m = to->if_contains("main")) {
      const bool* b = m->if_bool();
      if (b == nullptr) return Status::InvalidArgument(tw + ".main: not a boolean");
      ts.main = *b;
    }
    const boost::json::array* frames = ArrayField(*to, "frames");
    if (frames == nullptr) return Status::InvalidArgument(tw + ".frames: not an array");
    if (frames->size() > kMaxStackFrames)
      return Status::InvalidArgument(fmt::format("{}.frames: {}, more than {}", tw, frames->size(), kMaxStackFrames));
    for (size_t f = 0; f < frames->size(); ++f) {
      std::string fw = fmt::format("{}.frames[{}]", tw, f);
      const boost::json::object* fo = (*frames)[f].if_object();
      if (fo == nullptr) return Status::InvalidArgument(fw + ": not an object");
      Frame fr;
      Result<std::string> function = TextField(*fo, "function", fw, kMaxStackText);
      if (!function.ok()) return function.status();
      Result<std::string> file = TextField(*fo, "file", fw, kMaxStackText);
      if (!file.ok()) return file.status();
      fr.function = std::move(*function);
      fr.file = std::move(*file);
      if (fo->contains("line")) {
        Result<int> line = IntField(*fo, "line", fw, 0);
        if (!line.ok()) return line.status();
        fr.line = *line;
      }
      ts.frames.push_back(std::move(fr));
    }
    out.threads.push_back(std::move(ts));
  }
  return out;
}

}  // namespace dlaunch::launcher
