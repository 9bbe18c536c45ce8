#include "launcher/straggler/detector.hpp"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace dlaunch::launcher {
namespace {

constexpr const char* kBackward = "torch/autograd/__init__.py:197 backward";
constexpr const char* kStepLine = "train.py:40 step";
constexpr const char* kLoad = "data.py:17 load_batch";
constexpr const char* kForward = "model.py:9 forward";

// One rank's window of 100 ticks: `wait` of them in backward (the others'
// all-reduce), `load` in the data loader, the rest in the forward pass.
RankWindow Rank(int rank, int wait, int load, int node = 0, std::string role = "worker") {
  RankWindow w;
  w.rank = rank;
  w.node_rank = node;
  w.host = "n" + std::to_string(node);
  w.role = std::move(role);
  w.samples.period_ms = 100;
  w.samples.ticks = 100;
  int forward = 100 - wait - load;
  w.samples.top[kBackward] = wait;
  w.samples.user[kStepLine] = wait;
  if (load > 0) w.samples.top[kLoad] = load, w.samples.user[kLoad] = load;
  if (forward > 0) w.samples.top[kForward] = forward, w.samples.user[kForward] = forward;
  return w;
}

std::vector<RankWindow> SlowLoader() { return {Rank(0, 40, 3), Rank(1, 38, 3), Rank(2, 5, 41), Rank(3, 39, 3)}; }
std::vector<RankWindow> Clean() { return {Rank(0, 30, 3), Rank(1, 34, 3), Rank(2, 28, 3), Rank(3, 33, 3)}; }

TEST_CASE("synchronisation frames are the collectives, not any function called wait", "[straggler]") {
  struct Row {
    const char* key;
    bool sync;
  } rows[] = {
      {"torch/autograd/__init__.py:197 backward", true},
      {"torch/_tensor.py:488 backward", true},
      {"torch/distributed/distributed_c10d.py:1536 all_reduce", true},
      {"torch/distributed/distributed_c10d.py:3145 barrier", true},
      {"torch/futures/__init__.py:80 wait", true},
      {"horovod/torch/mpi_ops.py:900 synchronize", true},
      {"torch/nn/parallel/distributed.py:1000 _sync_buffers", true},
      {"sleeping in futex_wait_queue", true},
      {"threading.py:320 wait", false},   // a DataLoader's queue
      {"mymodel.py:12 backward", false},  // the user's own autograd Function
      {"queue.py:180 get", false},
      {"running", false},
      {"disk-wait in io_schedule", false},
      {"data.py:17 load_batch", false},
  };
  for (const Row& row : rows) {
    INFO(row.key);
    CHECK(IsSyncFrame(row.key) == row.sync);
  }
}

TEST_CASE("--straggler-ignore names a frame by function, file or line", "[straggler]") {
  CHECK(IgnoreMatches("data.py:17 load_batch", "load_batch"));
  CHECK(IgnoreMatches("data.py:17 load_batch", "data.py"));
  CHECK(IgnoreMatches("data.py:17 load_batch", "data.py:17"));
  CHECK(IgnoreMatches("data.py:17 load_batch", "data.py:17 load_batch"));
  CHECK(IgnoreMatches("torch/serialization.py:400 save", "serialization.py"));
  CHECK(!IgnoreMatches("data.py:17 load_batch", "data.py:18"));
  CHECK(!IgnoreMatches("data.py:17 load_batch", "load"));
  CHECK(!IgnoreMatches("data.py:17 load_batch", "a.py"));
  CHECK(!IgnoreMatches("data.py:17 load_batch", ""));
}

TEST_CASE("a rank that waits markedly less is named after two windows, with its frame", "[straggler]") {
  StragglerDetector d({});
  WindowVerdict first = d.Window(SlowLoader());
  REQUIRE(first.standing_out.size() == 1);
  CHECK(first.named.empty());
  CHECK(first.sync_share.at(2) == Approx(0.05));
  WindowVerdict second = d.Window(SlowLoader());
  REQUIRE(second.named.size() == 1);
  const Straggler& s = second.named.front();
  CHECK(s.scope == Straggler::Scope::kRank);
  CHECK(s.ranks == std::vector<int>{2});
  CHECK(s.frame == kLoad);
  CHECK(s.frame_share == Approx(0.41));
  CHECK(s.others_frame_share == Approx(0.03));
  CHECK(s.others_sync_share == Approx(0.39));
  CHECK(s.sync_frame == "backward");
  CHECK(NamedLine(s) ==
        "straggler: rank 2 (node 0, host n0) holds the others back: 41% of its time in data.py:17 load_batch, "
        "against 3% on the other ranks; the others spend 39% of theirs waiting in backward");
  // Named once: a third window says nothing new.
  WindowVerdict third = d.Window(SlowLoader());
  CHECK(third.named.empty());
  CHECK(third.cleared.empty());
  REQUIRE(d.named().size() == 1);
}

TEST_CASE("the others' share of a frame counts the ranks never in it as zero", "[straggler]") {
  // The others of rank 4 spend 3%, 0%, 10% and 0% in the loader: median 1.5%.
  std::vector<RankWindow> w = {Rank(0, 40, 3), Rank(1, 40, 0), Rank(2, 40, 10), Rank(3, 40, 0), Rank(4, 5, 41)};
  StragglerDetector d({});
  WindowVerdict v = d.Window(w);
  REQUIRE(v.standing_out.size() == 1);
  CHECK(v.standing_out.front().frame == kLoad);
  CHECK(v.standing_out.front().others_frame_share == Approx(0.015));
}

TEST_CASE("a straggler clears after two windows without standing out", "[straggler]") {
  StragglerDetector d({});
  d.Window(SlowLoader());
  REQUIRE(d.Window(SlowLoader()).named.size() == 1);
  CHECK(d.Window(Clean()).cleared.empty());  // one clean window is not enough
  WindowVerdict v = d.Window(Clean());
  REQUIRE(v.cleared.size() == 1);
  CHECK(ClearedLine(v.cleared.front()) == "straggler: rank 2 no longer holds the others back");
  CHECK(d.named().empty());
}

TEST_CASE("no false alarm: noise, one odd window, and a chatty rank 0", "[straggler]") {
  struct Case {
    const char* name;
    std::vector<std::vector<RankWindow>> windows;
  } cases[] = {
      {"clean", {Clean(), Clean(), Clean()}},
      // rank 2 stands out once, then not: never two in a row.
      {"one odd window", {SlowLoader(), Clean(), SlowLoader(), Clean()}},
      // rank 0 logs and saves a small checkpoint: the others wait 6% more.
      {"chatty rank 0",
       {{Rank(0, 26, 3), Rank(1, 32, 3), Rank(2, 31, 3), Rank(3, 33, 3)},
        {Rank(0, 26, 3), Rank(1, 32, 3), Rank(2, 31, 3), Rank(3, 33, 3)}}},
      // Everyone slow alike (a slow file system): no one holds the others back.
      {"all slow",
       {{Rank(0, 5, 60), Rank(1, 6, 58), Rank(2, 4, 61), Rank(3, 5, 60)},
        {Rank(0, 5, 60), Rank(1, 6, 58), Rank(2, 4, 61), Rank(3, 5, 60)}}},
      // Too few samples to judge (ranks that just started).
      {"few ticks", {{Rank(0, 40, 3), Rank(1, 38, 3)}, {Rank(0, 40, 3), Rank(1, 38, 3)}}},
  };
  cases[4].windows[0][1].samples.ticks = 3;
  cases[4].windows[1][1].samples.ticks = 3;
  for (const Case& c : cases) {
    INFO(c.name);
    StragglerDetector d({});
    for (const auto& w : c.windows) CHECK(d.Window(w).named.empty());
  }
}

TEST_CASE("a synchronous checkpoint that holds everyone back is named unless ignored", "[straggler]") {
  auto windows = [] {
    std::vector<RankWindow> w = {Rank(0, 5, 0), Rank(1, 45, 0), Rank(2, 44, 0), Rank(3, 46, 0)};
    // Rank 0 spends 40% of its time saving.
    w[0].samples.top["torch/serialization.py:400 save"] = 40;
    w[0].samples.top[kForward] -= 40;
    w[0].samples.user["train.py:60 checkpoint"] = 40;
    w[0].samples.user[kForward] -= 40;
    return w;
  };
  StragglerDetector plain({});
  plain.Window(windows());
  WindowVerdict v = plain.Window(windows());
  REQUIRE(v.named.size() == 1);
  CHECK(v.named.front().ranks == std::vector<int>{0});
  CHECK(v.named.front().frame == "train.py:60 checkpoint");

  for (const char* pattern : {"checkpoint", "train.py:60", "serialization.py"}) {
    INFO(pattern);
    StragglerDetector ignoring({kDefaultStragglerThreshold, {pattern}});
    CHECK(ignoring.Window(windows()).standing_out.empty());
    CHECK(ignoring.Window(windows()).named.empty());
  }
}

TEST_CASE("the threshold is the others' loss", "[straggler]") {
  // Rank 1 makes the others wait 15% more than it does.
  std::vector<RankWindow> w = {Rank(0, 20, 3), Rank(1, 5, 18), Rank(2, 21, 3), Rank(3, 19, 3)};
  StragglerDetector at10({0.10, {}});
  at10.Window(w);
  CHECK(at10.Window(w).named.size() == 1);
  StragglerDetector at20({0.20, {}});
  at20.Window(w);
  CHECK(at20.Window(w).named.empty());
}

TEST_CASE("slowness spread over every frame names the rank without a frame", "[straggler]") {
  // CPU contention: rank 1 is slower everywhere, so it waits less; no frame stands out.
  auto windows = [] {
    // Twice as slow in every frame: the data loader and the forward pass
    // take twice the share they take on rank 0.
    std::vector<RankWindow> w = {Rank(0, 60, 10), Rank(1, 20, 20)};
    w[0].samples.user[kForward] = w[0].samples.top[kForward] = 30;
    w[1].samples.user[kForward] = w[1].samples.top[kForward] = 60;
    return w;
  };
  StragglerDetector d({});
  d.Window(windows());
  WindowVerdict v = d.Window(windows());
  REQUIRE(v.named.size() == 1);
  CHECK(v.named.front().ranks == std::vector<int>{1});
  CHECK(v.named.front().frame.empty());
  CHECK(NamedLine(v.named.front()) ==
        "straggler: rank 1 (node 0, host n0) holds the others back: its time is spread over every frame, 20% at "
        "the synchronisation point; the others spend 60% of theirs waiting in backward");
}

TEST_CASE("every rank of one node slow names the node", "[straggler]") {
  std::vector<RankWindow> w = {Rank(0, 40, 3, 0), Rank(1, 41, 3, 0), Rank(2, 6, 40, 1), Rank(3, 5, 42, 1)};
  StragglerDetector d({});
  d.Window(w);
  WindowVerdict v = d.Window(w);
  REQUIRE(v.named.size() == 1);
  const Straggler& s = v.named.front();
  CHECK(s.scope == Straggler::Scope::kNode);
  CHECK(s.node_rank == 1);
  CHECK(s.ranks == std::vector<int>{2, 3});
  CHECK(s.frame == kLoad);
  CHECK(NamedLine(s).rfind("straggler: node 1 (host n1, ranks 2-3) holds the others back: 41% of their time in "
                           "data.py:17 load_batch",
                           0) == 0);
  CHECK(ClearedLine(s) == "straggler: node 1 no longer holds the others back");
}

TEST_CASE("ranks are compared with their own role only", "[straggler]") {
  // A parameter server never waits in the workers' all-reduce.
  std::vector<RankWindow> w = {Rank(0, 0, 0, 0, "ps"), Rank(1, 40, 3), Rank(2, 41, 3), Rank(3, 39, 3)};
  StragglerDetector d({});
  d.Window(w);
  CHECK(d.Window(w).named.empty());
  CHECK(d.Window(w).sync_share.count(0) == 1);
}

TEST_CASE("late samples are time in no frame, and a rank holding the GIL is named for it", "[straggler]") {
  auto windows = [] {
    std::vector<RankWindow> w = {Rank(0, 40, 3), Rank(1, 40, 3), Rank(2, 5, 3)};
    // Rank 2's sampler woke late for 35 ticks: its main thread held the GIL.
    w[2].samples.user[kForward] -= 35;
    w[2].samples.top[kForward] -= 35;
    w[2].samples.late = 35;
    return w;
  };
  StragglerDetector d({});
  d.Window(windows());
  WindowVerdict v = d.Window(windows());
  REQUIRE(v.named.size() == 1);
  CHECK(v.named.front().frame == kLateFrame);
}

TEST_CASE("a new generation starts with nothing named", "[straggler]") {
  StragglerDetector d({});
  d.Window(SlowLoader());
  d.Window(SlowLoader());
  REQUIRE(d.named().size() == 1);
  d.Reset();
  CHECK(d.named().empty());
  CHECK(d.Window(SlowLoader()).named.empty());  // a streak starts again
}

}  // namespace
}  // namespace dlaunch::launcher

namespace dlaunch::launcher {
namespace {

TEST_CASE("a native rank that runs while the others sleep is named by what /proc shows", "[straggler]") {
  auto native = [](int rank, int running) {
    RankWindow w;
    w.rank = rank;
    w.host = "n0";
    w.samples.period_ms = 100;
    w.samples.ticks = 20;
    if (running > 0) w.samples.top["running"] = running;
    if (running < 20) w.samples.top["sleeping in futex_wait_queue"] = 20 - running;
    return w;
  };
  std::vector<RankWindow> w = {native(0, 2), native(1, 19), native(2, 3)};
  StragglerDetector d({});
  d.Window(w);
  WindowVerdict v = d.Window(w);
  REQUIRE(v.named.size() == 1);
  CHECK(v.named.front().ranks == std::vector<int>{1});
  CHECK(NamedLine(v.named.front()) ==
        "straggler: rank 1 (node 0, host n0) holds the others back: 95% of its time running, against 13% on the "
        "other ranks; the others spend 88% of theirs waiting in futex_wait_queue");
}

}  // namespace
}  // namespace dlaunch::launcher

namespace dlaunch::launcher {
namespace {

// Ranks whose windows hold `ticks` samples, `wait` of every 20 in backward.
std::vector<RankWindow> Scaled(int ticks, std::vector<int> wait_of_20) {
  std::vector<RankWindow> out;
  for (size_t i = 0; i < wait_of_20.size(); ++i) {
    RankWindow w;
    w.rank = static_cast<int>(i);
    w.host = "n0";
    w.samples.period_ms = 100;
    w.samples.ticks = ticks;
    int wait = wait_of_20[i] * ticks / 20;
    w.samples.top[kBackward] = wait;
    w.samples.user[kStepLine] = wait;
    w.samples.top[kForward] = ticks - wait;
    w.samples.user[kForward] = ticks - wait;
    out.push_back(std::move(w));
  }
  return out;
}

TEST_CASE("a loss within the sampling noise of a short window names no one", "[straggler]") {
  // Two samples in 20 are 10%: chance in a 2 s window, a real loss in a 60 s one.
  StragglerDetector two_seconds({});
  for (int i = 0; i < 3; ++i) CHECK(two_seconds.Window(Scaled(20, {2, 2, 0, 2})).standing_out.empty());
  StragglerDetector minute({});
  minute.Window(Scaled(600, {2, 2, 0, 2}));
  WindowVerdict v = minute.Window(Scaled(600, {2, 2, 0, 2}));
  REQUIRE(v.named.size() == 1);
  CHECK(v.named.front().ranks == std::vector<int>{2});
}

TEST_CASE("a frame the others spend much time in too is named when it alone grew", "[straggler]") {
  // The others load for a third of their time; rank 2 loads for 60%, and its
  // forward pass takes its usual time (a smaller share of the same step).
  auto windows = [] {
    std::vector<RankWindow> w = {Rank(0, 40, 33), Rank(1, 40, 33), Rank(2, 13, 60), Rank(3, 40, 33)};
    return w;
  };
  StragglerDetector d({});
  d.Window(windows());
  WindowVerdict v = d.Window(windows());
  REQUIRE(v.named.size() == 1);
  CHECK(v.named.front().frame == kLoad);
}

}  // namespace
}  // namespace dlaunch::launcher
