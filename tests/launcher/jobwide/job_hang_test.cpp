// A hang of a multi-node job: a node's stacks as Report items that always fit
// the wire, and the host's summary over every node's ranks.
#include "launcher/jobwide/job_hang.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <boost/json/parse.hpp>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "rendezvous/codec.hpp"

namespace dlaunch::launcher {
namespace {

namespace rdzv = dlaunch::rendezvous;
namespace fs = std::filesystem;

// A Python rank whose main thread is in `where` <- step <- main, with `others`
// more threads of `frames` frames each and a raw dump of `raw` bytes.
RankStack Stack(int rank, const std::string& where, int others = 0, int frames = 3, std::size_t raw = 100) {
  RankStack s;
  s.rank = rank;
  s.pid = 1000 + rank;
  s.how = "python";
  ThreadStack main{
      "Current thread 0x7f00", true, {{where, "train.py", 10}, {"step", "train.py", 20}, {"main", "train.py", 30}}};
  for (int i = 0; i < others; ++i) {
    ThreadStack t{fmt::format("Thread 0x7f{:02}", i), false, {}};
    for (int f = 0; f < frames; ++f) t.frames.push_back({fmt::format("helper_{}_{}", i, f), "threading.py", f});
    s.threads.push_back(std::move(t));
  }
  s.threads.push_back(std::move(main));
  s.raw = std::string(raw, 'r');
  return s;
}

RankStack Parse(const std::string& item) {
  Result<RankStack> s = RankStackFromJson(boost::json::parse(item));
  REQUIRE(s.ok());
  return *s;
}

std::vector<std::string> MainFunctions(const RankStack& s) {
  std::vector<std::string> out;
  REQUIRE(s.Main() != nullptr);
  for (const Frame& f : s.Main()->frames) out.push_back(f.function);
  return out;
}

}  // namespace

TEST_CASE("job hang: a small stack goes whole", "[job_hang]") {
  std::vector<std::string> items = StackItems({Stack(0, "all_reduce", 1)});
  REQUIRE(items.size() == 1);
  RankStack back = Parse(items[0]);
  CHECK(back.rank == 0);
  CHECK(back.pid == 1000);
  CHECK(back.threads.size() == 2);
  CHECK(back.raw == std::string(100, 'r'));
}

TEST_CASE("job hang: a big stack is cut to fit: raw first, then other threads, then outer frames", "[job_hang]") {
  // Raw too big: it goes, the threads stay.
  RankStack back = Parse(StackItems({Stack(0, "all_reduce", 2, 3, 100'000)})[0]);
  CHECK(back.threads.size() == 3);
  CHECK(back.raw == std::string(kCutNote) + "\n");
  // Too many threads: the main one stays.
  back = Parse(StackItems({Stack(0, "all_reduce", 50, 20)})[0]);
  REQUIRE(back.threads.size() == 1);
  CHECK(MainFunctions(back) == std::vector<std::string>{"all_reduce", "step", "main"});
  // A main thread too deep: its innermost frames stay.
  RankStack deep = Stack(0, "all_reduce");
  for (int f = 0; f < 500; ++f) deep.threads.back().frames.push_back({fmt::format("outer_{}", f), "train.py", f});
  std::string item = StackItems({deep})[0];
  CHECK(item.size() <= rdzv::kMaxString);
  back = Parse(item);
  REQUIRE(back.Main() != nullptr);
  CHECK(back.Main()->frames.size() < 503);
  CHECK(back.Main()->frames.front().function == "all_reduce");
}

TEST_CASE("job hang: many ranks' items fit one Report frame", "[job_hang]") {
  std::vector<RankStack> stacks;
  for (int r = 0; r < 1000; ++r) stacks.push_back(Stack(r, "all_reduce", 5, 20, 5000));
  rdzv::Report report{1, 0, StackItems(stacks)};
  REQUIRE(report.items.size() == 1000);
  CHECK(rdzv::CheckEncodable(report).ok());
  CHECK(MainFunctions(Parse(report.items[999])).front() == "all_reduce");
}

TEST_CASE("job hang: a report's items are parsed, checked against the node's ranks, and named when bad", "[job_hang]") {
  rdzv::HangReport report;
  report.silent = std::chrono::seconds(6);
  rdzv::NodeStacks a{0, "a", 0, 2, true, "", StackItems({Stack(1, "all_reduce"), Stack(0, "all_reduce")})};
  rdzv::NodeStacks b{1, "b", 2, 2, true, "", {}};
  b.items = {"not json", StackItems({Stack(7, "x")})[0], StackItems({Stack(2, "load_batch")})[0],
             StackItems({Stack(2, "again")})[0]};
  rdzv::NodeStacks c{2, "c", 4, 3, false, "no answer within 15s", {}};
  report.nodes = {a, b, c};
  std::vector<std::string> problems;
  std::vector<RankStack> stacks = StacksOfReport(report, problems);
  REQUIRE(stacks.size() == 3);
  CHECK(stacks[0].rank == 0);
  CHECK(stacks[1].rank == 1);
  CHECK(stacks[2].rank == 2);
  REQUIRE(problems.size() == 2);
  CHECK(problems[0].starts_with("node 1 (b): 3 items of its report are not a stack (item 0: not JSON: "));
  CHECK(problems[1] == "node 2 (c), ranks 4-6: not sampled (no answer within 15s)");
}

TEST_CASE("job hang: the host prints the grouped summary over every node, keeps the stacks, and the stop lines",
          "[job_hang]") {
  fs::path dir = fs::temp_directory_path() / fmt::format("dlaunch-job-hang-test-{}", getpid());
  fs::create_directories(dir);
  std::vector<std::string> said;
  JobHangReporter hang([&said](const std::string& line) { said.push_back(line); }, nullptr,
                       [&dir] { return Result<std::string>(dir.string()); });
  hang.Suspected(rdzv::HangSuspected{std::chrono::milliseconds(6500), 2});
  CHECK(said == std::vector<std::string>{"no rank has made progress for 6s: collecting stacks"});
  said.clear();

  rdzv::HangReport report;
  report.silent = std::chrono::seconds(6);
  report.nodes = {
      {0, "a", 0, 2, true, "", StackItems({Stack(0, "all_reduce"), Stack(1, "all_reduce")})},
      {1, "b", 2, 2, true, "", StackItems({Stack(2, "load_batch"), Stack(3, "all_reduce")})},
  };
  hang.Report(report);
  CHECK(hang.StopLines("cause").empty());  // report only
  std::string file = (dir / "stacks-1.txt").string();
  CHECK(said ==
        std::vector<std::string>{
            "hang: ranks 0-1,3 (3) wait in all_reduce (train.py:10) <- step (train.py:20) <- main (train.py:30)",
            "hang: rank 2 (1) is elsewhere: load_batch (train.py:10) <- step (train.py:20) <- main "
            "(train.py:30)   <- odd one out",
            "hang: full stacks in " + file,
        });
  std::ifstream f(file);
  std::stringstream text;
  text << f.rdbuf();
  CHECK(text.str().find("=== rank 3 (pid 1003), by python") != std::string::npos);

  said.clear();
  report.stop = true;
  report.nodes[1] = {1, "b", 2, 2, false, "no answer within 15s", {}};
  hang.Report(report);
  std::string second = (dir / "stacks-2.txt").string();
  CHECK(said.back() == "hang: full stacks in " + second);
  CHECK(hang.StopLines("rendezvous h:1: no rank on any node made progress for 6s (--hang-action stop)") ==
        std::vector<std::string>{
            "job stopped after a hang; exit code 124",
            "root cause: rendezvous h:1: no rank on any node made progress for 6s (--hang-action stop)",
            "  | hang: ranks 0-1 (2) wait in all_reduce (train.py:10) <- step (train.py:20) <- main (train.py:30)",
            "  | hang: node 1 (b), ranks 2-3: not sampled (no answer within 15s)",
            "  | hang: full stacks in " + second,
        });
  fs::remove_all(dir);
}

}  // namespace dlaunch::launcher
