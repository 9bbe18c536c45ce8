// The hang detector alone: heartbeats with their silence in, the job's silence
// out, against a fake clock.
#include "rendezvous/hang_detector.hpp"

#include <catch2/catch.hpp>

namespace dlaunch::rendezvous {

using namespace std::chrono_literals;

namespace {

const Clock::time_point kHangT0{};

std::vector<envmap::Node> HangTable(int nodes) {
  std::vector<envmap::Node> table;
  for (int i = 0; i < nodes; ++i) table.push_back(envmap::Node{"n" + std::to_string(i), "10.0.0.1", 1, {}});
  return table;
}

// A detector with a 60s timeout over `nodes` nodes, generation begun at t0.
HangDetector Watching(int nodes) {
  HangDetector hangs("rendezvous head:29400", 60s);
  hangs.OnGeneration(HangTable(nodes), kHangT0);
  return hangs;
}

std::optional<std::chrono::milliseconds> BeatAll(HangDetector& hangs, int nodes, Clock::duration at, int silent_ms) {
  for (int r = 0; r < nodes; ++r) CHECK(hangs.OnHeartbeat(r, silent_ms, kHangT0 + at).empty());
  return hangs.Check();
}

}  // namespace

TEST_CASE("hang_detector: off with a zero timeout", "[hang_detector]") {
  HangDetector hangs("rendezvous", 0ms);
  hangs.OnGeneration(HangTable(1), kHangT0);
  hangs.OnHeartbeat(0, 0, kHangT0);
  CHECK_FALSE(BeatAll(hangs, 1, 10h, 36'000'000));
}

TEST_CASE("hang_detector: silent only once every running node has beaten", "[hang_detector]") {
  HangDetector hangs = Watching(2);
  CHECK_FALSE(hangs.Check());  // nobody heard from
  hangs.OnHeartbeat(0, 70'000, kHangT0 + 70s);
  CHECK_FALSE(hangs.Check());  // node 1 not yet
  hangs.OnHeartbeat(1, 65'000, kHangT0 + 66s);
  // From the latest output (node 1 at 1s) to the earliest beat (66s).
  CHECK(hangs.Check() == 65s);
}

TEST_CASE("hang_detector: the silence must reach the timeout", "[hang_detector]") {
  struct Case {
    Clock::duration beat;
    int silent_ms;
    std::optional<std::chrono::milliseconds> silent;
  };
  for (const Case& c : std::vector<Case>{{59s, 59'000, std::nullopt},
                                         {60s, 59'999, std::nullopt},
                                         {60s, 60'000, 60s},
                                         {90s, 75'000, 75s},
                                         // a beat cannot claim silence from before its generation
                                         {30s, 600'000, std::nullopt},
                                         {61s, 600'000, 61s}}) {
    HangDetector hangs = Watching(1);
    CAPTURE(c.silent_ms);
    CHECK(BeatAll(hangs, 1, c.beat, c.silent_ms) == c.silent);
  }
}

TEST_CASE("hang_detector: reported once, again only after new output and a new silence", "[hang_detector]") {
  HangDetector hangs = Watching(2);
  CHECK(BeatAll(hangs, 2, 60s, 60'000) == 60s);
  CHECK_FALSE(BeatAll(hangs, 2, 70s, 70'000));  // the same silence, longer
  // Output moved by less than the heartbeats' jitter (1s): not output.
  CHECK_FALSE(BeatAll(hangs, 2, 200s, 199'500));
  // Real output at 100s, then a new full silence.
  CHECK_FALSE(BeatAll(hangs, 2, 110s, 10'000));
  CHECK(BeatAll(hangs, 2, 160s, 60'000) == 60s);
}

TEST_CASE("hang_detector: a finished node beats no more, and its end is progress", "[hang_detector]") {
  HangDetector hangs = Watching(2);
  hangs.OnHeartbeat(0, 0, kHangT0 + 100s);  // node 0 printed at 100s
  hangs.OnNodeFinished(0, kHangT0 + 110s);  // and finished at 110s
  // Node 1, silent since the start, is not hung: node 0 worked until 110s.
  hangs.OnHeartbeat(1, 120'000, kHangT0 + 120s);
  CHECK_FALSE(hangs.Check());
  hangs.OnHeartbeat(1, 169'000, kHangT0 + 169s);
  CHECK_FALSE(hangs.Check());  // 59s after node 0's end
  // Node 1 alone decides: silent 60s after node 0's end, without node 0's beats.
  hangs.OnHeartbeat(1, 170'000, kHangT0 + 170s);
  CHECK(hangs.Check() == 60s);
  hangs.OnNodeFinished(1, kHangT0 + 171s);
  CHECK_FALSE(hangs.Check());  // nothing runs
}

TEST_CASE("hang_detector: a node's end before its last output moves nothing back", "[hang_detector]") {
  HangDetector hangs = Watching(2);
  hangs.OnHeartbeat(0, 0, kHangT0 + 100s);
  hangs.OnNodeFinished(0, kHangT0 + 50s);   // a late Done: its output at 100s stands
  hangs.OnNodeFinished(0, kHangT0 + 300s);  // a second end is no news
  hangs.OnHeartbeat(1, 160'000, kHangT0 + 160s);
  CHECK(hangs.Check() == 60s);
}

TEST_CASE("hang_detector: a negative silence counts as 0, with one line", "[hang_detector]") {
  HangDetector hangs = Watching(1);
  std::vector<Action> out = hangs.OnHeartbeat(0, -5, kHangT0 + 70s);
  REQUIRE(out.size() == 1);
  CHECK(std::get<Log>(out[0]).line ==
        "rendezvous head:29400: node 0 (n0) says its ranks have been silent for -5ms; counting 0");
  CHECK(std::get<Log>(out[0]).limit == "heartbeats with a negative silence");
  CHECK_FALSE(hangs.Check());
  CHECK(hangs.OnHeartbeat(7, 0, kHangT0).empty());  // not a node of this generation
}

TEST_CASE("hang_detector: a new generation starts afresh", "[hang_detector]") {
  HangDetector hangs = Watching(1);
  CHECK(BeatAll(hangs, 1, 60s, 60'000) == 60s);
  hangs.OnGeneration(HangTable(1), kHangT0 + 100s);
  CHECK_FALSE(hangs.Check());  // not heard from in this generation
  // The last report is forgotten: the same output time is a new silence.
  CHECK(BeatAll(hangs, 1, 160s, 60'000) == 60s);
  hangs.OnJobEnd();
  CHECK_FALSE(hangs.Check());
}

}  // namespace dlaunch::rendezvous
