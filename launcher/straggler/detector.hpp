// Which rank holds the others back, from one window of samples per rank.
//
// Step time is the wrong signal: every collective ends at the same moment on
// every rank, so all ranks take as long per step as the slowest. What differs
// is where the time goes. The others wait at the synchronisation point (inside
// backward's all-reduce, a barrier, a wait) and the straggler does not: it
// arrives last. So per window, among the ranks of one role (a parameter
// server or chief never waits in the workers' all-reduce):
//   - each rank's sync share s: its ticks whose innermost frame is a
//     synchronisation point (IsSyncFrame), over its ticks;
//   - the others' loss w = (median s of the others) - s: the share of their
//     time they spend waiting beyond what this rank does;
//   - a rank stands out when w is at least the threshold (--straggler-threshold,
//     0.10) and kNoiseMargin times the sampling error of a share of its samples,
//     and its s is under kMarkedly of the others' median. Time in frames
//     the user named (--straggler-ignore) is taken off w, so a checkpoint the
//     user knows of holds no one back.
// Where the straggler spends the time: the frame (innermost in the user's code,
// or overall when it has none) whose share exceeds the others' median share by
// the most, named when that excess is at least half of w and the frame grew
// (its share over the others') kFrameGrowth times as much as any other frame of
// the rank's that holds kFrameFloor of its time; else the slowness is spread
// over every frame (CPU contention makes every frame slower alike) and no
// frame is named.
// A rank is named once it stood out in kWindowsInARow windows in a row, and
// clears once it did not in as many. When every rank of a node (of two or
// more) stands out, the node is named instead of its ranks.
//
// Pure: no clock, no files; a table of windows in, verdicts out.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/defaults.hpp"
#include "launcher/straggler/samples.hpp"

namespace dlaunch::launcher {

using base::kDefaultStragglerThreshold;  // base/defaults.hpp
inline constexpr double kMarkedly = 0.75;
inline constexpr double kNoiseMargin = 2.5;
inline constexpr double kFrameGrowth = 1.5;
inline constexpr double kFrameFloor = 0.10;
inline constexpr int kWindowsInARow = 2;
// A rank with fewer ticks in a window (a rank that just started) is left out of it.
inline constexpr std::int64_t kMinWindowTicks = 8;

// One rank's window, as the node that runs it reports it.
struct RankWindow {
  int rank = 0;
  int node_rank = 0;
  std::string host;
  std::string role = "worker";
  RankSamples samples;
};

struct StragglerOptions {
  double threshold = kDefaultStragglerThreshold;
  std::vector<std::string> ignore;  // --straggler-ignore
};

// A straggler: one rank, or every rank of one node.
struct Straggler {
  enum class Scope { kRank, kNode };
  Scope scope = Scope::kRank;
  std::vector<int> ranks;  // sorted
  int node_rank = 0;
  std::string host;
  std::string role;
  std::string frame;              // "" when the slowness is spread
  double frame_share = 0;         // of its time in `frame`
  double others_frame_share = 0;  // the others' median share there
  double sync_share = 0;          // its share at the synchronisation point
  double others_sync_share = 0;   // the others' median share there
  std::string sync_frame;         // the function the others wait in ("backward")

  // "rank 2" or "node 1": who it is, for matching across windows.
  std::string Who() const;
};

struct WindowVerdict {
  std::map<int, double> sync_share;     // every rank compared this window
  std::vector<Straggler> standing_out;  // this window's
  std::vector<Straggler> named;         // named now, having stood out kWindowsInARow in a row
  std::vector<Straggler> cleared;       // named before, and no longer
};

// Whether a frame key ("PATH:LINE FUNCTION", samples.hpp) is a synchronisation
// point: a collective or barrier of torch.distributed, Horovod, mpi4py,
// DeepSpeed or TensorFlow, autograd's backward (where DDP's all-reduce ends),
// a future's wait; or a native rank's sleep ("sleeping in ...").
bool IsSyncFrame(std::string_view key);
// Whether `key` is the frame a --straggler-ignore `pattern` names: its
// function ("load_batch"), its file ("data.py", or a path's tail
// "utils/data.py") or its file and line ("data.py:17"), or the whole key.
bool IgnoreMatches(std::string_view key, std::string_view pattern);
// "load_batch" of "data.py:17 load_batch".
std::string_view FrameFunction(std::string_view key);

class StragglerDetector {
 public:
  explicit StragglerDetector(StragglerOptions options);
  // One window of the running ranks (any order; a rank twice is taken once).
  WindowVerdict Window(const std::vector<RankWindow>& ranks);
  // A new generation: nothing stood out, nothing is named.
  void Reset();
  const std::vector<Straggler>& named() const { return named_; }

 private:
  std::vector<Straggler> StandingOut(const std::vector<RankWindow>& ranks, std::map<int, double>& sync) const;

  StragglerOptions options_;
  std::map<std::string, int> streak_;  // by Who(): windows in a row it stood out
  std::map<std::string, int> absent_;  // named ones, by Who(): windows in a row it did not
  std::vector<Straggler> named_;
};

// The console line of a named straggler, without "dlaunch: ":
// "straggler: rank 2 (node 0, host h) holds the others back: 41% of its time in
// data.py:17 load_batch, against 3% on the other ranks; the others spend 38%
// of theirs waiting in backward".
std::string NamedLine(const Straggler& s);
// "straggler: rank 2 no longer holds the others back".
std::string ClearedLine(const Straggler& s);

}  // namespace dlaunch::launcher
