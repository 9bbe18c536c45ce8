// The progress files: what their text may say, and what a read does with
// whatever a worker left at the path (a link, a FIFO, a directory, a huge file).
#include "launcher/process/progress_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/envmap/fixtures.hpp"
#include "tests/temp_dir.hpp"

using namespace dlaunch::launcher;
using dlaunch::testing::TempDir;

namespace {

using Kind = ProgressText::Kind;

void Put(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc | std::ios::binary);
  f << text;
}

// A ProgressFiles over `dir` whose warnings land in `said`.
struct Files {
  Files(const TempDir& dir, int nproc) : files(dir.path, nproc, [this](const std::string& l) { said.push_back(l); }) {}
  ProgressFiles files;
  std::vector<std::string> said;
};

}  // namespace

TEST_CASE("progress text: a number, blanks around it, or nothing", "[progress]") {
  struct Case {
    std::string text;
    Kind kind;
    std::int64_t value;
  };
  const std::vector<Case> cases = {
      {"0", Kind::kNumber, 0},
      {"42", Kind::kNumber, 42},
      {"  17\n", Kind::kNumber, 17},
      {"\t5\r\n", Kind::kNumber, 5},
      {"007", Kind::kNumber, 7},
      {"9223372036854775807", Kind::kNumber, INT64_MAX},
      {"", Kind::kEmpty, -1},
      {" \n\t", Kind::kEmpty, -1},
      {"abc", Kind::kJunk, -1},
      {"12abc", Kind::kJunk, -1},
      {"1 2", Kind::kJunk, -1},
      {"-1", Kind::kJunk, -1},
      {"-0", Kind::kJunk, -1},
      {"+3", Kind::kJunk, -1},
      {"1.5", Kind::kJunk, -1},
      {"0x10", Kind::kJunk, -1},
      {"9223372036854775808", Kind::kJunk, -1},             // one over INT64_MAX
      {"123456789012345678901234567890", Kind::kJunk, -1},  // 30 digits
      {std::string("1\0", 2), Kind::kJunk, -1},
      {std::string(65, ' '), Kind::kJunk, -1},  // over the limit, blank or not
  };
  for (const Case& c : cases) {
    INFO("text '" << c.text << "'");
    ProgressText p = ParseProgress(c.text);
    CHECK(p.kind == c.kind);
    CHECK(p.value == c.value);
  }
}

TEST_CASE("progress file: numbers, nothing, and junk named with the path", "[progress]") {
  TempDir dir("progress");
  std::string path = dir / "p";
  CHECK(ReadProgressFile(path).kind == ProgressRead::Kind::kNothing);  // no file
  Put(path, "");
  CHECK(ReadProgressFile(path).kind == ProgressRead::Kind::kNothing);
  Put(path, " 12\n");
  ProgressRead r = ReadProgressFile(path);
  CHECK(r.kind == ProgressRead::Kind::kNumber);
  CHECK(r.value == 12);
  Put(path, "step=3\x1b[2J");
  r = ReadProgressFile(path);
  CHECK(r.kind == ProgressRead::Kind::kRefused);
  CHECK(r.why ==
        "progress file " + path + ": ignored 'step=3\\x1b[2J' (expected a step number from 0 to 9223372036854775807)");
  Put(path, "123456789012345678901234567890");
  CHECK(ReadProgressFile(path).why == "progress file " + path +
                                          ": ignored '123456789012345678901234567890' (expected a step number from 0 "
                                          "to 9223372036854775807)");
  Put(path, "-5");
  CHECK(ReadProgressFile(path).kind == ProgressRead::Kind::kRefused);
}

TEST_CASE("progress file: a huge file is read no further than its limit", "[progress]") {
  TempDir dir("progress");
  std::string path = dir / "p";
  Put(path, std::string(1 << 20, '7'));
  ProgressRead r = ReadProgressFile(path);
  CHECK(r.kind == ProgressRead::Kind::kRefused);
  CHECK(r.why == "progress file " + path + ": ignored '" + std::string(32, '7') +
                     "...' (more than 64 bytes; expected a step number)");
}

TEST_CASE("progress file: a link, a FIFO or a directory is refused without waiting", "[progress]") {
  TempDir dir("progress");
  std::string target = dir / "target";
  Put(target, "99");
  std::string link = dir / "link";
  REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
  ProgressRead r = ReadProgressFile(link);
  CHECK(r.kind == ProgressRead::Kind::kRefused);
  CHECK(r.why == "progress file " + link + ": ignored (a symbolic link, not a regular file)");

  // No writer ever opens it: a blocking open would wait here for ever.
  std::string fifo = dir / "fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  r = ReadProgressFile(fifo);
  CHECK(r.kind == ProgressRead::Kind::kRefused);
  CHECK(r.why == "progress file " + fifo + ": ignored (a FIFO, not a regular file)");

  std::string sub = dir / "sub";
  REQUIRE(mkdir(sub.c_str(), 0700) == 0);
  r = ReadProgressFile(sub);
  CHECK(r.kind == ProgressRead::Kind::kRefused);
  CHECK(r.why == "progress file " + sub + ": ignored (a directory, not a regular file)");
}

TEST_CASE("progress files: per rank, the largest value of this generation", "[progress]") {
  TempDir dir("progress");
  Files f(dir, 2);
  CHECK(f.files.Read() == std::vector<std::int64_t>{-1, -1});  // nothing prepared
  std::string p0 = f.files.Prepare(0, 0);
  std::string p1 = f.files.Prepare(0, 1);
  CHECK(p0 == dir / "progress-0-0");
  CHECK(p1 == dir / "progress-0-1");
  // Nothing is made until the worker writes: a missing file is no value, no warning.
  CHECK(access(p0.c_str(), F_OK) != 0);
  CHECK(f.files.Read() == std::vector<std::int64_t>{-1, -1});
  Put(p0, "5");
  CHECK(f.files.Read() == std::vector<std::int64_t>{5, -1});
  Put(p0, "3");  // a smaller number after a larger one: the largest stays
  Put(p1, "8\n");
  CHECK(f.files.Read() == std::vector<std::int64_t>{5, 8});
  Put(p0, "");  // a write under way
  CHECK(f.files.Read() == std::vector<std::int64_t>{5, 8});
  CHECK(f.said.empty());

  // The next generation: fresh paths, the old values and files gone.
  std::string q0 = f.files.Prepare(1, 0);
  CHECK(q0 == dir / "progress-1-0");
  CHECK(access(p0.c_str(), F_OK) != 0);
  CHECK(f.files.Read() == std::vector<std::int64_t>{-1, 8});
  CHECK(f.files.values() == std::vector<std::int64_t>{-1, 8});
}

TEST_CASE("progress files: one warning per rank and generation", "[progress]") {
  TempDir dir("progress");
  Files f(dir, 2);
  std::string p0 = f.files.Prepare(0, 0);
  std::string p1 = f.files.Prepare(0, 1);
  Put(p0, "7");
  f.files.Read();
  Put(p0, "oops");
  Put(p1, "-1");
  for (int i = 0; i < 3; ++i) CHECK(f.files.Read() == std::vector<std::int64_t>{7, -1});
  REQUIRE(f.said.size() == 2);
  CHECK(f.said[0] == "progress file " + p0 + ": ignored 'oops' (expected a step number from 0 to 9223372036854775807)");
  CHECK(f.said[1] == "progress file " + p1 + ": ignored '-1' (expected a step number from 0 to 9223372036854775807)");

  // A worker swaps its file for a FIFO: a warning, not a hang.
  std::string q0 = f.files.Prepare(1, 0);
  REQUIRE(mkfifo(q0.c_str(), 0600) == 0);
  f.files.Read();
  f.files.Read();
  REQUIRE(f.said.size() == 3);
  CHECK(f.said[2] == "progress file " + q0 + ": ignored (a FIFO, not a regular file)");

  // Preparing the same generation again clears the FIFO away.
  CHECK(f.files.Prepare(1, 0) == q0);
  struct stat st {};
  CHECK(lstat(q0.c_str(), &st) != 0);
  CHECK(f.files.Read() == std::vector<std::int64_t>{-1, -1});
  REQUIRE(f.said.size() == 3);
}

TEST_CASE("progress files: a path that cannot be cleared leaves the worker without one", "[progress]") {
  TempDir dir("progress");
  std::vector<std::string> said;
  ProgressFiles files(dir.path, 1, [&](const std::string& l) { said.push_back(l); });
  // A worker of this generation's earlier start left a directory at its path.
  std::string path = files.PathOf(0, 0);
  REQUIRE(mkdir(path.c_str(), 0700) == 0);
  REQUIRE(mkdir((path + "/in").c_str(), 0700) == 0);
  CHECK(files.Prepare(0, 0).empty());
  REQUIRE(said.size() == 1);
  CHECK(said[0].find("progress file " + path + ": cannot clear (") == 0);
  CHECK(said[0].find("local rank 0 runs without DLAUNCH_PROGRESS_FILE") != std::string::npos);
  CHECK(files.Read() == std::vector<std::int64_t>{-1});
  CHECK(said.size() == 1);
  CHECK(files.Prepare(0, 5).empty());  // no such local rank
}

TEST_CASE("progress by rank: a node's local ranks as the job's ranks, for a heartbeat", "[progress]") {
  TempDir dir("progress");
  dlaunch::envmap::JobLayout layout = dlaunch::envmap::testing::ThreeNodes(1);  // node b: ranks 2, 3, 4
  Files f(dir, 3);
  CHECK(ProgressByRank(f.files, layout).empty());
  for (int i = 0; i < 3; ++i) f.files.Prepare(2, i);
  Put(f.files.PathOf(2, 0), "11");
  Put(f.files.PathOf(2, 2), "13");
  using Pairs = std::vector<std::pair<int, std::int64_t>>;
  CHECK(ProgressByRank(f.files, layout) == Pairs{{2, 11}, {4, 13}});
}
