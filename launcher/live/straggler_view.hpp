// What the straggler watch adds to the live view: `dlaunch status` marks the
// ranks it named (and says its lines), `dlaunch stacks` shows where each
// rank's time went in the last window it compared. A LiveSource that passes
// every question on and adds to the answer.
#pragma once

#include <functional>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include "launcher/live/live.hpp"
#include "launcher/straggler/straggler_watch.hpp"

namespace dlaunch::launcher {

// The most frames a rank's profile shows.
inline constexpr size_t kProfileFrames = 6;

class StragglerLiveSource : public LiveSource {
 public:
  // `watch` gives the watch now (null: none, e.g. on a node that does not compare).
  StragglerLiveSource(LiveSource& inner, std::function<const StragglerWatch*()> watch)
      : inner_(inner), watch_(std::move(watch)) {}
  void Status(std::function<void(boost::json::object)> reply) override;
  void Stacks(std::function<void(boost::json::object)> reply) override;

 private:
  LiveSource& inner_;
  std::function<const StragglerWatch*()> watch_;
};

// Adds "straggler": true to the rows of the ranks `named` holds, and
// "stragglers": [their lines] to `doc` (none: unchanged). Text from workers
// and nodes (frame keys, host names) goes in as SafeUtf8 (text.hpp) makes it,
// here and in ProfileOf: the client parses strict JSON.
void MarkStragglers(boost::json::object& doc, const std::vector<Straggler>& named);
// {"window_s", "ranks": [{"rank", "node_rank", "host", "ticks", "late", "sync_share",
// "frames": [[KEY, share], ...]}]}: where each rank's time went, its largest
// user frames (top frames for a native rank) first.
boost::json::object ProfileOf(const std::vector<RankWindow>& windows, std::chrono::milliseconds window);

}  // namespace dlaunch::launcher
