#include "launcher/core/output.hpp"

#include <catch2/catch.hpp>

using namespace dlaunch::launcher;

TEST_CASE("lines are emitted whole however the reads fall", "[output]") {
  const std::string input = "alpha\nbeta gamma\n\ndelta\n";
  // Every way of cutting the input in two gives the same output.
  for (size_t cut = 0; cut <= input.size(); ++cut) {
    LineTagger t;
    std::string out;
    t.Feed(std::string_view(input).substr(0, cut), "[1]: ", out);
    t.Feed(std::string_view(input).substr(cut), "[1]: ", out);
    INFO(cut);
    CHECK(out == "[1]: alpha\n[1]: beta gamma\n[1]: \n[1]: delta\n");
    CHECK_FALSE(t.has_partial());
  }
}

TEST_CASE("a partial line is held back until its newline arrives", "[output]") {
  LineTagger t;
  std::string out;
  t.Feed("abc", "> ", out);
  CHECK(out.empty());
  t.Feed("def\ngh", "> ", out);
  CHECK(out == "> abcdef\n");
}

TEST_CASE("a final line without a newline is kept: tagged, it is ended; untagged, it is as written", "[output]") {
  LineTagger t;
  std::string out;
  t.Feed("one\ntwo", "> ", out);
  t.Finish("> ", out);
  CHECK(out == "> one\n> two\n");
  out.clear();
  t.Finish("> ", out);
  CHECK(out.empty());
  LineTagger raw;
  raw.Feed("one\ntwo", "", out);
  CHECK(out == "one\n");
  raw.Finish("", out);
  CHECK(out == "one\ntwo");
  out.clear();
  raw.Finish("", out);
  CHECK(out.empty());
}

TEST_CASE("untagged, an over-long line is cut at the cap with nothing added", "[output][bounds]") {
  LineTagger t(4);
  std::string out;
  t.Feed("abcdefghij\nxy", "", out);
  CHECK(out == "abcdefghij\n");  // the pieces "abcd", "efgh", "ij\n" came out one after another
  t.Feed("z", "", out);
  t.Finish("", out);
  CHECK(out == "abcdefghij\nxyz");
  // Each piece is emitted once it is complete: another worker's line may come between them.
  LineTagger u(4);
  std::string piece;
  u.Feed("abcdef", "", piece);
  CHECK(piece == "abcd");
  CHECK(u.has_partial());
}

TEST_CASE("untagged bytes pass on exactly however the reads fall", "[output][bounds]") {
  // Binary: NULs, carriage returns, bytes above 0x7f, lines longer than the
  // cap, and no final newline.
  std::string input;
  for (int i = 0; i < 700; ++i) input.push_back(static_cast<char>((i * 37 + i / 5) % 256));
  input += std::string(50, '\0') + "\n\n" + std::string(40, '\xff');
  for (size_t cap : {size_t{1}, size_t{7}, size_t{64}, kMaxLineBytes}) {
    for (size_t step : {size_t{1}, size_t{3}, size_t{64}, size_t{1000}}) {
      LineTagger t(cap);
      std::string out;
      for (size_t at = 0; at < input.size(); at += step) t.Feed(std::string_view(input).substr(at, step), "", out);
      t.Finish("", out);
      INFO("cap " << cap << ", reads of " << step);
      CHECK(out == input);
    }
  }
}

TEST_CASE("an over-long line is cut at the cap and continues tagged", "[output]") {
  LineTagger t(4);
  std::string out;
  t.Feed("abcdefghij\n", "|", out);
  CHECK(out == "|abcd\n|efgh\n|ij\n");
}

TEST_CASE("tag formats render every field", "[output]") {
  TagFields f{7, 3, 1, "ps", "stderr", "gpu-node-4"};
  CHECK(*RenderTag("[{rank}]: ", f, 0) == "[7]: ");
  CHECK(*RenderTag("{host}:{rank}| ", f, 0) == "gpu-node-4:7| ");
  CHECK(*RenderTag("{node_rank}.{local_rank} {role} {stream}|", f, 0) == "1.3 ps stderr|");
  CHECK(RenderTag("{time}", f, 0)->size() == 19);  // 1970-01-01T00:00:00 in local time
  auto bad = RenderTag("[{rnk}]", f, 0);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().rfind("--tag-output: bad format '[{rnk}]' (", 0) == 0);
}

TEST_CASE("the tail keeps the last lines of a stream", "[output]") {
  TailBuffer tail(16);
  tail.Append("first line\nsecond\n");
  tail.Append("third\nfourth\n");
  CHECK(tail.LastLines(2) == std::vector<std::string>{"third", "fourth"});
  CHECK(tail.LastLines(10).back() == "fourth");
  CHECK(tail.LastLines(10).size() <= 3);  // the cap dropped the oldest
}

TEST_CASE("the last line: the line being written, else the last whole one, as a terminal shows it",
          "[output][bounds]") {
  using namespace std::chrono_literals;
  auto t0 = std::chrono::steady_clock::time_point{} + 1s;
  LastLine l(8);
  CHECK(l.line().empty());
  CHECK_FALSE(l.at());
  l.Append("first\nsecond\n", t0);
  CHECK(l.line() == "second");
  CHECK(l.at() == t0);
  l.Append("thi", t0 + 1s);
  CHECK(l.line() == "thi");
  l.Append("rd\nfou", t0 + 2s);
  CHECK(l.line() == "fou");
  l.Append("rth\n", t0 + 3s);
  CHECK(l.line() == "fourth");
  CHECK(l.at() == t0 + 3s);
  // A progress bar redrawn with '\r': what is on the screen.
  l.Append(" 10%\r 20%\r", t0);
  CHECK(l.line() == " 20%");
  l.Append("\r", t0);
  CHECK(l.line() == " 20%");
  // Cut at the cap, and bounded whatever comes.
  l.Append("\n" + std::string(1 << 20, 'y') + "\n", t0);
  CHECK(l.line() == "yyyyyyyy");
  l.Append(std::string(1 << 20, 'z'), t0);
  CHECK(l.line() == "zzzzzzzz");
}

TEST_CASE("an over-long line is cut at the cap across reads, and a line longer than a read stays whole",
          "[output][bounds]") {
  LineTagger t(4);
  std::string out;
  t.Feed("ab", "|", out);
  t.Feed("cdef", "|", out);
  t.Feed("ghij\nxy", "|", out);
  CHECK(out == "|abcd\n|efgh\n|ij\n");
  t.Finish("|", out);
  CHECK(out == "|abcd\n|efgh\n|ij\n|xy\n");
  // At the default cap, a line of several reads comes out whole, once.
  LineTagger big;
  std::string line(3 * 65536 + 17, 'q');
  line += '\n';
  out.clear();
  for (size_t at = 0; at < line.size(); at += 65536) big.Feed(std::string_view(line).substr(at, 65536), "[0]: ", out);
  CHECK(out == "[0]: " + line);
  CHECK_FALSE(big.has_partial());
}
