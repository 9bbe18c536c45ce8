// The straggler watch on a fake clock: one comparison a window, the lines and
// events it gives, --straggler-action stop, and a new generation.
#include "launcher/straggler/straggler_watch.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "../core/fakes.hpp"

namespace dlaunch::launcher {
namespace {

using namespace std::chrono_literals;

RankWindow WatchRank(int rank, int wait, int load) {
  RankWindow w;
  w.rank = rank;
  w.host = "h0";
  w.samples.period_ms = 100;
  w.samples.ticks = 20;
  w.samples.top["torch/autograd/__init__.py:197 backward"] = wait;
  w.samples.user["train.py:40 step"] = wait;
  w.samples.top["data.py:17 load_batch"] = load;
  w.samples.user["data.py:17 load_batch"] = load;
  w.samples.top["model.py:9 forward"] = 20 - wait - load;
  w.samples.user["model.py:9 forward"] = 20 - wait - load;
  return w;
}

struct WatchBed {
  explicit WatchBed(StragglerWatchOptions o) {
    o.window = 2s;
    events.Observe([this](std::string_view e, const boost::json::object& f) {
      seen.push_back(std::string(e));
      fields.push_back(f);
    });
    watch = std::make_unique<StragglerWatch>(
        timers, events, o,
        [this](std::function<void(std::vector<RankWindow>)> done) {
          ++asked;
          if (hold) {
            held = std::move(done);
          } else {
            done(slow ? std::vector<RankWindow>{WatchRank(0, 8, 1), WatchRank(1, 1, 9), WatchRank(2, 8, 1)}
                      : std::vector<RankWindow>{WatchRank(0, 8, 1), WatchRank(1, 8, 1), WatchRank(2, 8, 1)});
          }
        },
        StragglerWatch::Hooks{[this](const std::string& l) { lines.push_back(l); },
                              [this](int code, const std::string& cause) {
                                stop_code = code;
                                stop_cause = cause;
                              }});
  }
  testing::FakeTimers timers;
  EventLog events;
  std::unique_ptr<StragglerWatch> watch;
  bool slow = true;
  bool hold = false;
  std::function<void(std::vector<RankWindow>)> held;
  int asked = 0;
  std::vector<std::string> lines, seen;
  std::vector<boost::json::object> fields;
  int stop_code = 0;
  std::string stop_cause;
};

TEST_CASE("the watch compares once a window and names the straggler once", "[straggler_watch]") {
  WatchBed bed({});
  bed.timers.Advance(1999ms);
  CHECK(bed.asked == 0);
  bed.timers.Advance(1ms);
  CHECK(bed.asked == 1);
  CHECK(bed.lines.empty());  // one window is not enough
  REQUIRE(bed.seen == std::vector<std::string>{"straggler_window"});
  CHECK(bed.fields[0].at("window").as_int64() == 1);
  CHECK(bed.fields[0].at("sync_pct").as_object().at("1").as_int64() == 5);
  bed.timers.Advance(2s);
  REQUIRE(bed.lines.size() == 1);
  CHECK(bed.lines[0].find("straggler: rank 1 (node 0, host h0) holds the others back: 45% of its time in "
                          "data.py:17 load_batch") == 0);
  REQUIRE(bed.seen.back() == "straggler");
  CHECK(bed.fields.back().at("state").as_string() == "named");
  CHECK(bed.fields.back().at("frame").as_string() == "data.py:17 load_batch");
  CHECK(bed.watch->named().size() == 1);
  bed.timers.Advance(2s);
  CHECK(bed.lines.size() == 1);
  CHECK(bed.stop_code == 0);  // report: the job runs on
  bed.slow = false;
  bed.timers.Advance(4s);
  REQUIRE(bed.lines.size() == 2);
  CHECK(bed.lines[1] == "straggler: rank 1 no longer holds the others back");
  CHECK(bed.fields.back().at("state").as_string() == "cleared");
}

TEST_CASE("--straggler-action stop ends the job and writes the node's host", "[straggler_watch]") {
  char tmpl[] = "/tmp/dlaunch-watch-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  StragglerWatchOptions o;
  o.stop = true;
  o.file = dir + "/bad-nodes";
  WatchBed bed(o);
  bed.timers.Advance(4s);
  CHECK(bed.stop_code == 122);
  CHECK(bed.stop_cause.find("straggler: rank 1") == 0);
  CHECK(bed.stop_cause.find("(--straggler-action stop; exit code 122)") != std::string::npos);
  std::ifstream in(o.file);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == "h0\n");
  // The stop says the line as the job's root cause: the watch does not say it too.
  CHECK(bed.lines.empty());
  int asked = bed.asked;
  bed.timers.Advance(10s);
  CHECK(bed.asked == asked);  // stopped once; asked no more
  std::filesystem::remove_all(dir);
}

TEST_CASE("--straggler-file is never a planted link or a FIFO", "[straggler_watch]") {
  char tmpl[] = "/tmp/dlaunch-watch-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string victim = dir + "/victim";
  std::ofstream(victim) << "keep\n";
  std::filesystem::create_symlink(victim, dir + "/link");
  CHECK_FALSE(WriteStragglerFile(dir + "/link", {"h"}).ok());
  REQUIRE(mkfifo((dir + "/fifo").c_str(), 0600) == 0);
  CHECK_FALSE(WriteStragglerFile(dir + "/fifo", {"h"}).ok());  // returns at once
  std::ifstream in(victim);
  std::string line;
  std::getline(in, line);
  CHECK(line == "keep");
  std::filesystem::remove_all(dir);
}

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

TEST_CASE("--straggler-file is never another's file or a hard link", "[straggler_watch]") {
  char tmpl[] = "/tmp/dlaunch-watch-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string victim = dir + "/victim";
  std::ofstream(victim) << "keep\n";
  // A hard link to a file of this user's: writing through it would truncate that file.
  REQUIRE(link(victim.c_str(), (dir + "/hard").c_str()) == 0);
  CHECK_FALSE(WriteStragglerFile(dir + "/hard", {"h"}).ok());
  CHECK(FirstLine(victim) == "keep");
  if (geteuid() == 0) {
    // As root in a sticky directory open to all (/tmp): `nobody` plants the
    // file, to read the host root writes or to put its own there afterwards;
    // or plants a link to a directory where a new file does harm.
    REQUIRE(chmod(dir.c_str(), 01777) == 0);
    std::string planted = dir + "/planted";
    std::ofstream(planted) << "nobody's\n";
    REQUIRE(chown(planted.c_str(), 65534, 65534) == 0);
    CHECK_FALSE(WriteStragglerFile(planted, {"h"}).ok());
    CHECK(FirstLine(planted) == "nobody's");
    std::string elsewhere = dir + "/elsewhere";
    std::filesystem::create_directory(elsewhere);
    std::filesystem::create_directory_symlink(elsewhere, dir + "/sub");
    REQUIRE(lchown((dir + "/sub").c_str(), 65534, 65534) == 0);
    CHECK_FALSE(WriteStragglerFile(dir + "/sub/bad-nodes", {"h"}).ok());
    CHECK_FALSE(std::filesystem::exists(elsewhere + "/bad-nodes"));
  }
  // A file of this user's, with one link, is replaced.
  std::filesystem::remove(dir + "/hard");
  REQUIRE(WriteStragglerFile(victim, {"h1", "h2"}).ok());
  CHECK(FirstLine(victim) == "h1");
  std::filesystem::remove_all(dir);
}

TEST_CASE("--straggler-file holds one host a line, whatever name a node joined under", "[straggler_watch]") {
  // A node names itself at its join: a name with a newline would add a
  // line, a host the orchestrator then keeps the job away from.
  char tmpl[] = "/tmp/dlaunch-watch-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string file = dir + "/bad-nodes";
  CHECK_FALSE(WriteStragglerFile(file, {"n3\nn0"}).ok());
  CHECK_FALSE(WriteStragglerFile(file, {"n3\x1b[2J"}).ok());
  CHECK_FALSE(std::filesystem::exists(file));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a restart clears what was named, in the events too", "[straggler_watch]") {
  WatchBed bed({});
  bed.timers.Advance(4s);
  REQUIRE(bed.watch->named().size() == 1);
  bed.watch->NewGeneration();
  CHECK(bed.watch->named().empty());
  CHECK(bed.lines.back() == "straggler: rank 1 no longer holds the others back (the workers restarted)");
  REQUIRE(bed.seen.back() == "straggler");
  CHECK(bed.fields.back().at("state").as_string() == "cleared");
}

TEST_CASE("a slow gather holds the next window, and a new generation drops it", "[straggler_watch]") {
  WatchBed bed({});
  bed.hold = true;
  bed.timers.Advance(2s);
  CHECK(bed.asked == 1);
  bed.timers.Advance(2s);
  CHECK(bed.asked == 1);  // the last question is still out
  auto stale = std::move(bed.held);
  bed.watch->NewGeneration();
  stale({WatchRank(0, 8, 1), WatchRank(1, 1, 9), WatchRank(2, 8, 1)});
  CHECK(bed.seen.empty());  // the old generation's answer counts for nothing
  bed.timers.Advance(2s);
  CHECK(bed.asked == 2);
}

TEST_CASE("no rank to compare, no window", "[straggler_watch]") {
  WatchBed bed({});
  bed.hold = true;
  bed.timers.Advance(2s);
  bed.held({});
  CHECK(bed.seen.empty());
}

}  // namespace
}  // namespace dlaunch::launcher
