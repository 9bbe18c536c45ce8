#include "launcher/straggler/detector.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "launcher/core/text.hpp"

namespace dlaunch::launcher {
namespace {

// "PATH:LINE" and "FUNCTION" of a key.
std::pair<std::string_view, std::string_view> SplitKey(std::string_view key) {
  size_t sp = key.find(' ');
  if (sp == std::string_view::npos) return {key, {}};
  return {key.substr(0, sp), key.substr(sp + 1)};
}

std::string_view PathOf(std::string_view loc) {
  size_t colon = loc.rfind(':');
  return colon == std::string_view::npos ? loc : loc.substr(0, colon);
}

// Functions that only ever wait for the other ranks, whatever library defines them.
constexpr std::array<std::string_view, 22> kCollectives = {"all_reduce",
                                                           "allreduce",
                                                           "all_gather",
                                                           "allgather",
                                                           "all_gather_into_tensor",
                                                           "all_gather_object",
                                                           "_all_gather_base",
                                                           "reduce_scatter",
                                                           "reduce_scatter_tensor",
                                                           "_reduce_scatter_base",
                                                           "all_to_all",
                                                           "all_to_all_single",
                                                           "alltoall",
                                                           "barrier",
                                                           "monitored_barrier",
                                                           "broadcast_object_list",
                                                           "synchronize",
                                                           "grouped_allreduce",
                                                           "allreduce_",
                                                           "batch_reduce",
                                                           "all_reduce_coalesced",
                                                           "all_gather_coalesced"};
// Names too common to mean a collective outside a distributed library.
constexpr std::array<std::string_view, 8> kLibraryWaits = {"wait",    "broadcast", "reduce", "gather",
                                                           "scatter", "recv",      "send",   "backward"};
constexpr std::array<std::string_view, 7> kDistributedPaths = {
    "torch/distributed/",           "torch/futures/", "torch/nn/parallel/", "horovod/", "mpi4py/", "deepspeed/comm/",
    "tensorflow/python/distribute/"};

bool InDistributedLibrary(std::string_view path) {
  for (std::string_view p : kDistributedPaths)
    if (path.starts_with(p)) return true;
  return false;
}

int Percent(double share) { return static_cast<int>(std::lround(share * 100)); }

// One rank of a window, reduced to shares of its ticks.
struct Shares {
  const RankWindow* window = nullptr;
  double sync = 0;
  double ignored = 0;
  std::map<std::string, double, std::less<>> frames;  // user frames (top for a native rank), and kLateFrame
  std::map<std::string, double, std::less<>> sync_frames;
};

}  // namespace

std::string_view FrameFunction(std::string_view key) { return SplitKey(key).second; }

bool IsSyncFrame(std::string_view key) {
  if (key.starts_with(kSleepingIn)) return true;
  auto [loc, function] = SplitKey(key);
  if (function.empty()) return false;
  for (std::string_view name : kCollectives)
    if (function == name) return true;
  std::string_view path = PathOf(loc);
  if (function.starts_with("_sync") && path.starts_with("torch/nn/parallel/")) return true;
  for (std::string_view name : kLibraryWaits) {
    if (function != name) continue;
    if (InDistributedLibrary(path)) return true;
    // loss.backward(): torch/_tensor.py calls torch/autograd/__init__.py, where
    // the engine runs and DDP's all-reduce of the gradients ends.
    if (name == "backward" && (path.starts_with("torch/autograd/") || path == "torch/_tensor.py")) return true;
  }
  return false;
}

bool IgnoreMatches(std::string_view key, std::string_view pattern) {
  if (pattern.empty()) return false;
  auto [loc, function] = SplitKey(key);
  std::string_view path = PathOf(loc);
  if (key == pattern || function == pattern || loc == pattern || path == pattern) return true;
  std::string tail = "/" + std::string(pattern);
  return path.ends_with(tail) || loc.ends_with(tail);
}

std::string Straggler::Who() const {
  return scope == Scope::kNode ? fmt::format("node {}", node_rank) : fmt::format("rank {}", ranks.front());
}

StragglerDetector::StragglerDetector(StragglerOptions options) : options_(std::move(options)) {}

void StragglerDetector::Reset() {
  streak_.clear();
  absent_.clear();
  named_.clear();
}

namespace {

bool Ignored(std::string_view key, const std::vector<std::string>& ignore) {
  for (const std::string& p : ignore)
    if (IgnoreMatches(key, p)) return true;
  return false;
}

Shares SharesOf(const RankWindow& w, const std::vector<std::string>& ignore) {
  Shares s;
  s.window = &w;
  double ticks = static_cast<double>(w.samples.ticks);
  std::int64_t sync = 0, ignored_user = 0, ignored_top = 0;
  for (const auto& [key, n] : w.samples.top) {
    if (Ignored(key, ignore)) {
      ignored_top += n;
    } else if (IsSyncFrame(key)) {
      sync += n;
      s.sync_frames[key] += static_cast<double>(n) / ticks;
    }
  }
  for (const auto& [key, n] : w.samples.user)
    if (Ignored(key, ignore)) ignored_user += n;
  s.sync = static_cast<double>(sync) / ticks;
  s.ignored = static_cast<double>(std::max(ignored_user, ignored_top)) / ticks;
  // Where its time went: the user's frames; a native rank (or one with no
  // user frame at all) by its innermost ones.
  const FrameCounts& frames = w.samples.user.empty() ? w.samples.top : w.samples.user;
  for (const auto& [key, n] : frames)
    if (!Ignored(key, ignore) && !IsSyncFrame(key) && key != kNoUserFrame && key != kOtherFrames)
      s.frames[key] = static_cast<double>(n) / ticks;
  if (w.samples.late > 0) s.frames[std::string(kLateFrame)] = static_cast<double>(w.samples.late) / ticks;
  return s;
}

// The median of the `n` values sorted_at(0..n-1) (ascending) with the one at
// `pos` taken out, in O(1): what a rank's others show, from one sort of the
// whole group.
template <typename At>
double MedianWithout(size_t n, size_t pos, At&& sorted_at) {
  if (n < 2) return 0;
  auto at = [&](size_t j) { return sorted_at(j < pos ? j : j + 1); };  // index j of the n - 1 left
  size_t m = n - 1;
  return m % 2 == 1 ? at(m / 2) : (at(m / 2 - 1) + at(m / 2)) / 2;
}

// The same, of `sorted` with one element equal to `x` taken out.
double MedianWithout(const std::vector<double>& sorted, double x) {
  size_t pos = static_cast<size_t>(std::lower_bound(sorted.begin(), sorted.end(), x) - sorted.begin());
  return MedianWithout(sorted.size(), pos, [&](size_t j) { return sorted[j]; });
}

// One frame's share on every rank of a group, sorted: `zeros` ranks that were
// never in it, then the others' shares.
struct FrameColumn {
  size_t zeros = 0;
  std::vector<double> shares;  // sorted
};

// What every rank of a group is compared with, computed once a window.
struct GroupView {
  explicit GroupView(const std::vector<Shares>& group) {
    std::map<std::string, double, std::less<>> waits;  // sync frame -> its share, summed over the group
    for (const Shares& s : group) {
      sync.push_back(s.sync);
      ignored.push_back(s.ignored);
      for (const auto& [key, share] : s.sync_frames) waits[key] += share;
    }
    std::sort(sync.begin(), sync.end());
    std::sort(ignored.begin(), ignored.end());
    double most = 0;
    for (const auto& [key, share] : waits) {
      if (share <= most) continue;
      most = share;
      // A native rank's "sleeping in WCHAN" waits in WCHAN.
      wait_frame = std::string(key.starts_with(kSleepingIn) ? std::string_view(key).substr(kSleepingIn.size())
                                                            : FrameFunction(key));
    }
  }
  // The group's shares of `key` (one of a rank's frames), sorted. Built for
  // every frame at the first call, so that each rank that stands out (half of
  // a job can) reads its others' medians in O(log n), not O(n) per frame.
  const FrameColumn& Column(const std::vector<Shares>& group, std::string_view key) {
    if (columns.empty()) {
      for (const Shares& s : group)
        for (const auto& [k, share] : s.frames) columns[k].shares.push_back(share);
      for (auto& [k, c] : columns) {
        std::sort(c.shares.begin(), c.shares.end());
        c.zeros = group.size() - c.shares.size();
      }
    }
    return columns.find(key)->second;
  }
  // The others' median share of `key`, for a rank whose share of it is `share`.
  double OthersIn(const std::vector<Shares>& group, std::string_view key, double share) {
    const FrameColumn& c = Column(group, key);
    size_t pos = share <= 0 ? 0
                            : c.zeros + static_cast<size_t>(std::lower_bound(c.shares.begin(), c.shares.end(), share) -
                                                            c.shares.begin());
    return MedianWithout(c.zeros + c.shares.size(), pos,
                         [&](size_t j) { return j < c.zeros ? 0.0 : c.shares[j - c.zeros]; });
  }

  std::vector<double> sync, ignored;  // sorted
  std::string wait_frame;             // the function the group waits in most
  std::map<std::string, FrameColumn, std::less<>> columns;
};

// The rank at `me` of `group`, as a straggler of this window, or nullopt.
std::optional<Straggler> StandsOut(const std::vector<Shares>& group, GroupView& view, size_t me, double threshold) {
  const Shares& r = group[me];
  double others_sync = MedianWithout(view.sync, r.sync);
  double others_ignored = MedianWithout(view.ignored, r.ignored);
  double loss = others_sync - r.sync - std::max(0.0, r.ignored - others_ignored);
  if (loss < threshold || r.sync >= kMarkedly * others_sync) return std::nullopt;
  // A share of n samples is only known to about sqrt(p(1-p)/n): with 20
  // samples a window, two of them are 10%, and chance alone would name a rank
  // of a clean job now and then. The loss must stand clear of that noise.
  double p = std::clamp(others_sync, 0.05, 0.95);
  double noise = std::sqrt(p * (1 - p) / static_cast<double>(r.window->samples.ticks));
  if (loss < kNoiseMargin * noise) return std::nullopt;
  Straggler s;
  s.ranks = {r.window->rank};
  s.node_rank = r.window->node_rank;
  s.host = r.window->host;
  s.role = r.window->role;
  s.sync_share = r.sync;
  s.others_sync_share = others_sync;
  s.sync_frame = view.wait_frame;
  // Each of its frames once: its share, the others' median share there, and
  // how much it grew (its share over theirs; a frame they never sit in grew
  // without bound).
  struct Seen {
    const std::string* key;
    double share, others, grew;
  };
  std::vector<Seen> seen;
  for (const auto& [key, share] : r.frames) {
    double others = view.OthersIn(group, key, share);
    seen.push_back({&key, share, others, others > 0 ? share / others : kFrameGrowth * 100});
  }
  // The frame whose share exceeds the others' most.
  const Seen* top = nullptr;
  for (const Seen& f : seen)
    if (f.share - f.others > (top != nullptr ? top->share - top->others : 0)) top = &f;
  if (top != nullptr) s.frame = *top->key, s.frame_share = top->share, s.others_frame_share = top->others;
  // Where one frame took the time, that frame grew far more than the rank's
  // other frames did; a slower CPU makes every frame grow alike, and then the
  // slowness is spread and no frame is named. The reference is the most any
  // other frame of its (of a tenth of its time or more) grew.
  double most_other = 0;
  for (const Seen& f : seen)
    if (&f != top && f.share >= kFrameFloor) most_other = std::max(most_other, f.grew);
  bool one_frame = top != nullptr && top->share - top->others >= loss / 2 &&
                   (most_other == 0 || top->grew >= kFrameGrowth * most_other);
  if (!one_frame) s.frame.clear(), s.frame_share = 0, s.others_frame_share = 0;
  return s;
}

// Every rank of a node (two or more) standing out: the node, with its ranks' mean shares.
Straggler NodeOf(const std::vector<Straggler>& ranks) {
  Straggler n = ranks.front();
  n.scope = Straggler::Scope::kNode;
  n.ranks.clear();
  double count = static_cast<double>(ranks.size());
  n.sync_share = n.others_sync_share = n.frame_share = n.others_frame_share = 0;
  for (const Straggler& r : ranks) {
    n.ranks.push_back(r.ranks.front());
    n.sync_share += r.sync_share / count;
    n.others_sync_share += r.others_sync_share / count;
    if (r.frame != n.frame) n.frame.clear();
    n.frame_share += r.frame_share / count;
    n.others_frame_share += r.others_frame_share / count;
  }
  if (n.frame.empty()) n.frame_share = n.others_frame_share = 0;
  std::sort(n.ranks.begin(), n.ranks.end());
  return n;
}

}  // namespace

std::vector<Straggler> StragglerDetector::StandingOut(const std::vector<RankWindow>& ranks,
                                                      std::map<int, double>& sync) const {
  std::map<std::string, std::vector<Shares>> groups;  // by role
  std::set<int> seen;
  std::map<int, int> node_ranks;  // ranks compared, by node
  for (const RankWindow& w : ranks) {
    if (w.samples.ticks < kMinWindowTicks || !seen.insert(w.rank).second) continue;
    Shares s = SharesOf(w, options_.ignore);
    sync[w.rank] = s.sync;
    ++node_ranks[w.node_rank];
    groups[w.role].push_back(std::move(s));
  }
  std::map<int, std::vector<Straggler>> by_node;
  for (const auto& [role, group] : groups) {
    if (group.size() < 2) continue;
    GroupView view(group);
    for (size_t i = 0; i < group.size(); ++i)
      if (std::optional<Straggler> s = StandsOut(group, view, i, options_.threshold))
        by_node[s->node_rank].push_back(*s);
  }
  std::vector<Straggler> out;
  for (auto& [node, list] : by_node) {
    bool whole_node = list.size() >= 2 && static_cast<int>(list.size()) == node_ranks[node] && node_ranks.size() > 1;
    if (whole_node) {
      out.push_back(NodeOf(list));
    } else {
      for (Straggler& s : list) out.push_back(std::move(s));
    }
  }
  return out;
}

WindowVerdict StragglerDetector::Window(const std::vector<RankWindow>& ranks) {
  WindowVerdict v;
  v.standing_out = StandingOut(ranks, v.sync_share);
  std::map<std::string, int> streak;
  for (const Straggler& s : v.standing_out) {
    std::string who = s.Who();
    streak[who] = streak_[who] + 1;
    bool named = std::any_of(named_.begin(), named_.end(), [&](const Straggler& n) { return n.Who() == who; });
    if (named) {
      absent_[who] = 0;
    } else if (streak[who] >= kWindowsInARow) {
      named_.push_back(s);
      absent_[who] = 0;
      v.named.push_back(s);
    }
  }
  streak_ = std::move(streak);
  for (auto it = named_.begin(); it != named_.end();) {
    std::string who = it->Who();
    if (streak_.count(who) || ++absent_[who] < kWindowsInARow) {
      ++it;
      continue;
    }
    absent_.erase(who);
    v.cleared.push_back(*it);
    it = named_.erase(it);
  }
  return v;
}

std::string NamedLine(const Straggler& s) {
  std::string who = s.scope == Straggler::Scope::kNode
                        ? fmt::format("node {} (host {}, ranks {})", s.node_rank, s.host, RankRanges(s.ranks))
                        : fmt::format("rank {} (node {}, host {})", s.ranks.front(), s.node_rank, s.host);
  std::string its = s.scope == Straggler::Scope::kNode ? "their" : "its";
  std::string where =
      s.frame.empty()
          ? fmt::format("{} time is spread over every frame, {}% at the synchronisation point", its,
                        Percent(s.sync_share))
          // A native rank's frame is what /proc shows ("running"), not a place.
          : fmt::format("{}% of {} time {}{}, against {}% on the other ranks", Percent(s.frame_share), its,
                        s.frame.find(':') == std::string::npos ? "" : "in ", s.frame, Percent(s.others_frame_share));
  std::string wait = s.sync_frame.empty() ? "waiting" : "waiting in " + s.sync_frame;
  return fmt::format("straggler: {} holds the others back: {}; the others spend {}% of theirs {}", who, where,
                     Percent(s.others_sync_share), wait);
}

std::string ClearedLine(const Straggler& s) {
  return fmt::format("straggler: {} no longer holds the others back", s.Who());
}

}  // namespace dlaunch::launcher
