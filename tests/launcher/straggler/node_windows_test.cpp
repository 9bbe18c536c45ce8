// A node's windows: read from the samples files its ranks' hooks write, never
// trusting them, and carried between nodes as Report items.
#include "launcher/straggler/node_windows.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;

struct SamplesDir {
  SamplesDir() {
    char tmpl[] = "/tmp/dlaunch-windows-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~SamplesDir() { fs::remove_all(path); }
  void Write(int pid, std::int64_t ticks, std::int64_t in_load) const {
    std::ofstream(fmt_path(pid)) << "dlaunch-samples 1\nperiod_ms 100\nticks " << ticks << "\nuser " << in_load
                                 << " data.py:17 load_batch\ntop " << in_load << " data.py:17 load_batch\n";
  }
  std::string fmt_path(int pid) const { return path + "/" + std::to_string(pid) + ".samples"; }
  std::string path;
};

TEST_CASE("a window is what each rank's file gained since the last one", "[node_windows]") {
  SamplesDir dir;
  std::vector<std::string> warnings;
  NodeWindows node(dir.path, nullptr, [&](const std::string& l) { warnings.push_back(l); });
  std::vector<LocalRank> ranks = {{4, 101, "worker"}, {5, 102, "worker"}};
  dir.Write(101, 10, 2);
  // 102 wrote nothing yet: left out.
  std::vector<RankWindow> first = node.Take(ranks, 2, "n2");
  REQUIRE(first.size() == 1);
  CHECK(first[0].rank == 4);
  CHECK(first[0].node_rank == 2);
  CHECK(first[0].host == "n2");
  CHECK(first[0].samples.ticks == 10);
  dir.Write(101, 30, 12);
  dir.Write(102, 20, 0);
  std::vector<RankWindow> second = node.Take(ranks, 2, "n2");
  REQUIRE(second.size() == 2);
  CHECK(second[0].samples.ticks == 20);
  CHECK(second[0].samples.user.at("data.py:17 load_batch") == 10);
  CHECK(second[1].samples.ticks == 20);
  CHECK(node.last().size() == 2);
  CHECK(warnings.empty());
  // Rank 4's process is gone (a restart): its file goes, so a new process
  // given pid 101 later starts from nothing.
  CHECK(node.Take({{5, 102, "worker"}}, 2, "n2").size() == 1);
  CHECK_FALSE(fs::exists(dir.fmt_path(101)));
  CHECK(fs::exists(dir.fmt_path(102)));
}

TEST_CASE("a samples file that is not one is ignored with one line, once", "[node_windows]") {
  SamplesDir dir;
  std::vector<std::string> warnings;
  NodeWindows node(dir.path, nullptr, [&](const std::string& l) { warnings.push_back(l); });
  std::ofstream(dir.fmt_path(201)) << "GET / HTTP/1.1\n";
  fs::create_symlink("/etc/passwd", dir.fmt_path(202));
  REQUIRE(mkfifo(dir.fmt_path(203).c_str(), 0600) == 0);  // must not block
  std::ofstream(dir.fmt_path(204)) << std::string(kMaxSamplesFile + 10, 'x');
  std::vector<LocalRank> ranks = {{0, 201, "worker"}, {1, 202, "worker"}, {2, 203, "worker"}, {3, 204, "worker"}};
  CHECK(node.Take(ranks, 0, "h").empty());
  CHECK(node.Take(ranks, 0, "h").empty());
  REQUIRE(warnings.size() == 4);
  CHECK(warnings[0].find("201.samples (line 1: expected 'dlaunch-samples 1'") != std::string::npos);
  CHECK(warnings[1].find("202.samples (a symbolic link, not a regular file)") != std::string::npos);
  CHECK(warnings[2].find("203.samples (a FIFO, not a regular file)") != std::string::npos);
  CHECK(warnings[3].find("more than 65536 bytes") != std::string::npos);
}

TEST_CASE("a rank with no file is asked of the native sampler", "[node_windows]") {
  SamplesDir dir;
  RankSamples native;
  native.period_ms = 100;
  native.ticks = 12;
  native.top["running"] = 12;
  NodeWindows node(
      dir.path, [&](int pid) { return pid == 301 ? std::optional<RankSamples>(native) : std::nullopt; },
      [](const std::string&) {});
  std::vector<RankWindow> w = node.Take({{0, 301, "worker"}, {1, 302, "worker"}}, 0, "h");
  REQUIRE(w.size() == 1);
  CHECK(w[0].samples.top.at("running") == 12);
}

TEST_CASE("a window crosses nodes as a bounded item", "[node_windows]") {
  RankWindow w;
  w.rank = 7;
  w.node_rank = 3;
  w.host = "n3";
  w.role = "worker";
  w.samples.period_ms = 100;
  w.samples.ticks = 600;
  w.samples.late = 4;
  for (int i = 0; i < 64; ++i) w.samples.user["f" + std::to_string(i) + ".py:1 " + std::string(200, 'x')] = i + 1;
  w.samples.top["torch/autograd/__init__.py:197 backward"] = 300;
  std::string item = WindowItem(w, 4096);
  REQUIRE(!item.empty());
  CHECK(item.size() <= 4096);
  Result<RankWindow> back = WindowFromItem(item);
  REQUIRE(back.ok());
  CHECK(back->rank == 7);
  CHECK(back->samples.ticks == 600);
  CHECK(back->samples.late == 4);
  CHECK(back->samples.top.at("torch/autograd/__init__.py:197 backward") == 300);
  // The largest counts were kept; the rest add up under "(other frames)".
  std::int64_t sum = 0;
  for (const auto& [k, n] : back->samples.user) sum += n;
  CHECK(sum == 64 * 65 / 2);
  CHECK(back->samples.user.count("f63.py:1 " + std::string(200, 'x')) == 1);
  CHECK(back->samples.user.count(std::string(kOtherFrames)) == 1);
}

TEST_CASE("a window of counts at the cap crosses nodes", "[node_windows]") {
  // The keys past kMaxWireKeys are summed as "(other frames)": that sum stays
  // a count the other side takes.
  RankWindow w;
  w.rank = 1;
  w.samples.ticks = kMaxSampleCount;
  for (size_t i = 0; i < kMaxSampleKeys; ++i) w.samples.top["f" + std::to_string(i) + ".py:1 f"] = kMaxSampleCount;
  std::string item = WindowItem(w, 4096);
  REQUIRE(!item.empty());
  Result<RankWindow> back = WindowFromItem(item);
  REQUIRE(back.ok());
  CHECK(back->samples.top.at(std::string(kOtherFrames)) == kMaxSampleCount);
}

TEST_CASE("an item from another node that is not a window is refused", "[node_windows]") {
  for (const char* bad : {"", "[]", "{\"rank\": -1}", "{\"rank\": 1}", "{\"rank\": 1, \"ticks\": \"x\"}",
                          "{\"rank\": 1, \"period_ms\":1,\"ticks\":9999999999999999999,\"late\":0,\"late_ms\":0,"
                          "\"max_late_ms\":0,\"cpu_us\":0,\"wall_ms\":0}",
                          "{\"rank\":1,\"period_ms\":1,\"ticks\":1,\"late\":0,\"late_ms\":0,\"max_late_ms\":0,"
                          "\"cpu_us\":0,\"wall_ms\":0,\"user\":{\"a\":-1}}",
                          "{\"rank\":1,\"period_ms\":1,\"ticks\":1,\"late\":0,\"late_ms\":0,\"max_late_ms\":0,"
                          "\"cpu_us\":0,\"wall_ms\":0,\"top\":[1]}",
                          // A frame's count that a sum of them would overflow.
                          "{\"rank\":1,\"period_ms\":1,\"ticks\":1,\"late\":0,\"late_ms\":0,\"max_late_ms\":0,"
                          "\"cpu_us\":0,\"wall_ms\":0,\"top\":{\"a\":9223372036854775807,\"b\":9223372036854775807}}",
                          "{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":1}}}}}"}) {
    INFO(bad);
    CHECK_FALSE(WindowFromItem(bad).ok());
  }
}

}  // namespace
}  // namespace dlaunch::launcher
