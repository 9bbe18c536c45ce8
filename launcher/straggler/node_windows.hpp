// One node's side of straggler detection: the window of each of its ranks,
// from the samples files their Python hooks write (samples.hpp) or, for a rank
// that writes none, from a native sampler (--straggler-native), and that
// window as the item of a rendezvous Report (the coordinator's "profile"
// question, so that the process hosting it compares every node's ranks).
// Every call happens on the event loop's thread.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "launcher/straggler/detector.hpp"
#include "launcher/straggler/samples.hpp"

namespace dlaunch::launcher {

// A running local rank, as the node's run knows it.
struct LocalRank {
  int rank = 0;
  int pid = 0;
  std::string role = "worker";
};

class NodeWindows {
 public:
  // `dumps_dir`: DLAUNCH_STACKS_DIR of the run's workers. `native`, when set,
  // gives the cumulative samples of a pid that wrote no file (nullopt: none).
  // `warn` says one line, at most once per pid (a file that is not one).
  NodeWindows(std::string dumps_dir, std::function<std::optional<RankSamples>(int pid)> native,
              std::function<void(const std::string&)> warn);

  // Each rank's samples since the last call (since it started, the first
  // time), with `node_rank` and `host` filled in. A rank with nothing to say
  // (no file yet, a refused one, no native samples) is left out.
  std::vector<RankWindow> Take(const std::vector<LocalRank>& ranks, int node_rank, const std::string& host);
  // What the last Take returned.
  const std::vector<RankWindow>& last() const { return last_; }

 private:
  std::optional<RankSamples> Read(int pid);

  std::string dumps_dir_;
  std::function<std::optional<RankSamples>(int)> native_;
  std::function<void(const std::string&)> warn_;
  std::map<int, RankSamples> before_;  // by pid: the counts at the last Take
  std::map<int, bool> warned_;
  std::vector<RankWindow> last_;
};

// The most keys of each kind a window carries between nodes; the rest are
// summed as kOtherFrames.
inline constexpr std::size_t kMaxWireKeys = 16;

// A window as a Report item: {"rank", "node_rank", "host", "role", "period_ms",
// "ticks", "late", "late_ms", "max_late_ms", "cpu_us", "wall_ms", "user": {KEY:
// N}, "top": {KEY: N}}, at most `max_bytes` (the codec's string cap): the
// smallest counts go to kOtherFrames first.
std::string WindowItem(const RankWindow& w, std::size_t max_bytes);
// The inverse, for input from another node: bounded (depth, keys as
// ParseSamples), never throws; InvalidArgument naming the bad field.
Result<RankWindow> WindowFromItem(std::string_view item);

}  // namespace dlaunch::launcher
