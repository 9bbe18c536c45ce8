#include "launcher/live/straggler_view.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

void MarkStragglers(boost::json::object& doc, const std::vector<Straggler>& named) {
  if (named.empty()) return;
  std::set<int> ranks;
  boost::json::array lines;
  for (const Straggler& s : named) {
    ranks.insert(s.ranks.begin(), s.ranks.end());
    lines.emplace_back(SafeUtf8(NamedLine(s), false));
  }
  if (boost::json::value* rows = doc.if_contains("rows"); rows != nullptr && rows->is_array()) {
    for (boost::json::value& row : rows->as_array()) {
      boost::json::object* o = row.if_object();
      const boost::json::value* rank = o != nullptr ? o->if_contains("rank") : nullptr;
      if (rank != nullptr && rank->is_int64() && ranks.count(static_cast<int>(rank->as_int64())))
        (*o)["straggler"] = true;
    }
  }
  doc["stragglers"] = std::move(lines);
}

boost::json::object ProfileOf(const std::vector<RankWindow>& windows, std::chrono::milliseconds window) {
  auto share = [](std::int64_t n, std::int64_t ticks) {
    return ticks > 0 ? std::round(1000.0 * static_cast<double>(n) / static_cast<double>(ticks)) / 1000 : 0.0;
  };
  boost::json::array ranks;
  for (const RankWindow& w : windows) {
    const FrameCounts& counts = w.samples.user.empty() ? w.samples.top : w.samples.user;
    std::vector<std::pair<std::string, std::int64_t>> frames(counts.begin(), counts.end());
    if (w.samples.late > 0) frames.emplace_back(std::string(kLateFrame), w.samples.late);
    std::sort(frames.begin(), frames.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    if (frames.size() > kProfileFrames) frames.resize(kProfileFrames);
    boost::json::array f;
    for (const auto& [key, n] : frames)
      f.push_back(boost::json::array{boost::json::string(SafeUtf8(key, false)), share(n, w.samples.ticks)});
    std::int64_t sync = 0;
    for (const auto& [key, n] : w.samples.top)
      if (IsSyncFrame(key)) sync += n;
    ranks.push_back(boost::json::object{{"rank", w.rank},
                                        {"node_rank", w.node_rank},
                                        {"host", SafeUtf8(w.host, false)},
                                        {"ticks", w.samples.ticks},
                                        {"late", w.samples.late},
                                        {"sync_share", share(sync, w.samples.ticks)},
                                        {"frames", std::move(f)}});
  }
  return boost::json::object{{"window_s", static_cast<double>(window.count()) / 1000}, {"ranks", std::move(ranks)}};
}

void StragglerLiveSource::Status(std::function<void(boost::json::object)> reply) {
  inner_.Status([this, reply = std::move(reply)](boost::json::object doc) {
    if (const StragglerWatch* w = watch_()) MarkStragglers(doc, w->named());
    reply(std::move(doc));
  });
}

void StragglerLiveSource::Stacks(std::function<void(boost::json::object)> reply) {
  inner_.Stacks([this, reply = std::move(reply)](boost::json::object doc) {
    if (const StragglerWatch* w = watch_(); w != nullptr && !w->last().empty())
      doc["profile"] = ProfileOf(w->last(), w->window());
    reply(std::move(doc));
  });
}

}  // namespace dlaunch::launcher
