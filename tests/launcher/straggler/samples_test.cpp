#include "launcher/straggler/samples.hpp"

#include <string>

#include <catch2/catch.hpp>

namespace dlaunch::launcher {
namespace {

constexpr std::string_view kFile =
    "dlaunch-samples 1\n"
    "period_ms 100\n"
    "ticks 50\n"
    "late 2\n"
    "late_ms 450\n"
    "max_late_ms 300\n"
    "cpu_us 1200\n"
    "wall_ms 5000\n"
    "user 30 data.py:17 load_batch\n"
    "user 18 train.py:40 step\n"
    "top 30 data.py:17 load_batch\n"
    "top 18 torch/autograd/__init__.py:197 backward\n";

TEST_CASE("a samples file is read field by field", "[samples]") {
  Result<RankSamples> s = ParseSamples(kFile);
  REQUIRE(s.ok());
  CHECK(s->period_ms == 100);
  CHECK(s->ticks == 50);
  CHECK(s->late == 2);
  CHECK(s->late_ms == 450);
  CHECK(s->max_late_ms == 300);
  CHECK(s->cpu_us == 1200);
  CHECK(s->wall_ms == 5000);
  CHECK(s->user.at("data.py:17 load_batch") == 30);
  CHECK(s->top.at("torch/autograd/__init__.py:197 backward") == 18);
  CHECK(s->user.size() == 2);
}

TEST_CASE("a samples file that is not one is refused naming the line", "[samples]") {
  CHECK(ParseSamples("").status().message().find("empty") != std::string::npos);
  CHECK(ParseSamples("GET / HTTP/1.1\n").status().message().find("line 1") != std::string::npos);
  std::string bad = "dlaunch-samples 1\nticks -3\n";
  CHECK(ParseSamples(bad).status().message().find("line 2: expected 'ticks N'") != std::string::npos);
  CHECK(!ParseSamples("dlaunch-samples 1\nticks 99999999999999999999\n").ok());
  CHECK(!ParseSamples("dlaunch-samples 1\nuser 3\n").ok());
  CHECK(!ParseSamples(std::string("dlaunch-samples 1\nuser 3 a\x01") + "b\n").ok());
  CHECK(!ParseSamples("dlaunch-samples 1\nuser 3 " + std::string(kMaxSampleKey + 1, 'k') + "\n").ok());
  CHECK(!ParseSamples(std::string(kMaxSamplesFile + 1, 'x')).ok());
  std::string many = "dlaunch-samples 1\n";
  for (size_t i = 0; i <= kMaxSampleKeys; ++i) many += "top 1 f" + std::to_string(i) + "\n";
  CHECK(ParseSamples(many).status().message().find("more than 64 'top' keys") != std::string::npos);
  // A newer hook's extra field is skipped.
  CHECK(ParseSamples("dlaunch-samples 1\nticks 4\nsomething_new 7\n").value().ticks == 4);
}

TEST_CASE("counts that a sum of them could overflow are refused", "[samples]") {
  // Each count fits 18 digits, but the file may name a key again, and the
  // detector sums up to kMaxSampleKeys of them: neither may wrap.
  std::string again = "dlaunch-samples 1\nticks 10\n";
  for (int i = 0; i < 10; ++i) again += "top 999999999999999999 data.py:17 load_batch\n";
  CHECK_FALSE(ParseSamples(again).ok());
  CHECK_FALSE(ParseSamples("dlaunch-samples 1\nticks 999999999999999999\n").ok());
  CHECK_FALSE(ParseSamples("dlaunch-samples 1\nuser 999999999999999999 a.py:1 f\n").ok());
  std::string at_cap = "dlaunch-samples 1\nticks " + std::to_string(kMaxSampleCount) + "\ntop " +
                       std::to_string(kMaxSampleCount / 2) + " k\ntop " + std::to_string(kMaxSampleCount / 2) + " k\n";
  Result<RankSamples> ok = ParseSamples(at_cap);
  REQUIRE(ok.ok());
  CHECK(ok->top.at("k") == kMaxSampleCount / 2 * 2);
}

TEST_CASE("a window is the difference of two reads", "[samples]") {
  RankSamples before = ParseSamples(kFile).value();
  RankSamples now = before;
  now.ticks += 10;
  now.user["data.py:17 load_batch"] += 6;
  now.user["model.py:9 forward"] = 4;
  now.top["data.py:17 load_batch"] += 10;
  now.wall_ms += 1000;
  RankSamples d = SamplesSince(now, before);
  CHECK(d.ticks == 10);
  CHECK(d.wall_ms == 1000);
  CHECK(d.late == 0);
  CHECK(d.user == FrameCounts{{"data.py:17 load_batch", 6}, {"model.py:9 forward", 4}});
  CHECK(d.top == FrameCounts{{"data.py:17 load_batch", 10}});

  // A sampler that started again (a new process at the same path) is taken whole.
  RankSamples fresh;
  fresh.period_ms = 100;
  fresh.ticks = 3;
  fresh.top["x.py:1 f"] = 3;
  CHECK(SamplesSince(fresh, before) == fresh);
}

}  // namespace
}  // namespace dlaunch::launcher

namespace dlaunch::launcher {
namespace {

TEST_CASE("a sampler writes its file a quarter window apart, from 0.5 s to 5 s", "[samples]") {
  using std::chrono::milliseconds;
  CHECK(SampleFlush(milliseconds(2000)) == milliseconds(500));
  CHECK(SampleFlush(milliseconds(8000)) == milliseconds(2000));
  CHECK(SampleFlush(milliseconds(60000)) == milliseconds(5000));
}

}  // namespace
}  // namespace dlaunch::launcher
