// ParseMultiProg and ReadMultiProgText: srun --multi-prog files as srun reads
// them (ranks, '*', comments, quotes, continued lines, CRLF) become one group
// per line, and every bad file gets one message naming its file and line.
#include "launcher/config/multi_prog.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/core/text.hpp"
#include "tests/temp_dir.hpp"

namespace dlaunch::launcher {
namespace {

struct WantGroup {
  int line;
  std::vector<std::string> argv;
};

// The file read as a run reads it, then parsed for `world_size` ranks.
Result<envmap::ProgramTable> ReadMultiProg(const std::string& path, int world_size) {
  Result<std::string> text = ReadMultiProgText(path);
  if (!text.ok()) return text.status();
  return ParseMultiProg(*text, path, world_size);
}

void CheckTable(const Result<envmap::ProgramTable>& got, const std::vector<WantGroup>& groups,
                const std::vector<int>& group_of, const std::string& file = "run.conf") {
  INFO((got.ok() ? std::string("ok") : got.status().message()));
  REQUIRE(got.ok());
  CHECK(got->group_of == group_of);
  REQUIRE(got->groups.size() == groups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    INFO("group " << i);
    const envmap::ProgramGroup& g = got->groups[i];
    CHECK(g.role == "line" + std::to_string(groups[i].line));
    CHECK(g.line == file + ":" + std::to_string(groups[i].line));
    CHECK(g.argv == groups[i].argv);
    CHECK(g.local_rank_arg_at == g.argv.size());
    CHECK(g.expand);
    CHECK(g.exe.empty());
    CHECK(g.restarts == -1);
  }
}

std::string Error(const Result<envmap::ProgramTable>& got) {
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().code() == Code::kInvalidArgument);
  return got.status().message();
}

}  // namespace

TEST_CASE("multi-prog lines become groups in file order", "[multi_prog]") {
  struct Case {
    const char* what;
    std::string text;
    int world_size;
    std::vector<WantGroup> groups;
    std::vector<int> group_of;
  } cases[] = {
      {"srun(1)'s example",
       "4-6       hostname\n1,7       echo  task:%t\n0,2-3     echo  offset:%o\n",
       8,
       {{1, {"hostname"}}, {2, {"echo", "task:%t"}}, {3, {"echo", "offset:%o"}}},
       {2, 1, 2, 2, 0, 0, 0, 1}},
      {"interleaved lines", "0,2 a\n1,3 b\n", 4, {{1, {"a"}}, {2, {"b"}}}, {0, 1, 0, 1}},
      {"'*' takes every rank no line above names",
       "2 server --port 1\n* worker --id %o\n",
       4,
       {{1, {"server", "--port", "1"}}, {2, {"worker", "--id", "%o"}}},
       {1, 1, 0, 1}},
      {"a lone '*'", "* a %t\n", 3, {{1, {"a", "%t"}}}, {0, 0, 0}},
      {"'*' with no rank left adds no group, as srun ignores it", "0-1 a\n* b\n", 2, {{1, {"a"}}}, {0, 0}},
      {"comments and blank lines keep the file's numbers",
       "# head\n\n   # indented\n0-1 a\n\t\n2 b x\n",
       3,
       {{4, {"a"}}, {6, {"b", "x"}}},
       {0, 0, 1}},
      {"'#' inside a line is an argument", "0 a # b\n", 1, {{1, {"a", "#", "b"}}}, {0}},
      {"CRLF line ends", "0 a x\r\n1 b\r\n", 2, {{1, {"a", "x"}}, {2, {"b"}}}, {0, 1}},
      {"tabs and runs of blanks, no final newline", "\t0\t a \t--x   y  ", 1, {{1, {"a", "--x", "y"}}}, {0}},
      {"single quotes keep blanks, backslashes and '%', and may be empty",
       "0 sh -c 'echo  %t \\ done' '' a'b c'd\n",
       1,
       {{1, {"sh", "-c", "echo  %%t \\ done", "", "ab cd"}}},
       {0}},
      {"a backslash keeps the next byte", "0 a b\\ c \\%t \\'x \\\\\n", 1, {{1, {"a", "b c", "%%t", "'x", "\\"}}}, {0}},
      {"a backslash at a line's end continues it, in quotes too",
       "0 a \\\n  b\\\nc 'd \\\ne'\n1 f\n",
       2,
       {{1, {"a", "bc", "d e"}}, {5, {"f"}}},
       {0, 1}},
      {"a backslash that ends the file ends the line", "0 a b\\", 1, {{1, {"a", "b"}}}, {0}},
      {"ranks out of order are fine without %o", "3,1 a %t\n0,2 b\n", 4, {{1, {"a", "%t"}}, {2, {"b"}}}, {1, 0, 1, 0}},
      {"leading zeros", "00,01 a\n", 2, {{1, {"a"}}}, {0, 0}},
      {"a line per rank", "0 a\n1 b\n2 c\n", 3, {{1, {"a"}}, {2, {"b"}}, {3, {"c"}}}, {0, 1, 2}},
      {"bytes past ASCII (UTF-8) are arguments", "0 echo h\xc3\xa9\n", 1, {{1, {"echo", "h\xc3\xa9"}}}, {0}},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    CheckTable(ParseMultiProg(c.text, "run.conf", c.world_size), c.groups, c.group_of);
  }
}

TEST_CASE("a bad multi-prog file gets one message naming its file and line", "[multi_prog][bounds]") {
  const std::string long_arg(kMaxMultiProgLine, 'x');
  const std::string half(kMaxMultiProgLine / 2, 'x');
  struct Case {
    std::string text;
    std::string error;
    int world_size = 4;
  } cases[] = {
      {"0-x a\n", "multi-prog run.conf:1: expected RANKS as in '0,2-3' or '*', got '0-x'"},
      {"0,,1 a\n", "multi-prog run.conf:1: expected RANKS as in '0,2-3' or '*', got '0,,1'"},
      {"0, a\n", "multi-prog run.conf:1: expected RANKS as in '0,2-3' or '*', got '0,'"},
      {"-1 a\n", "multi-prog run.conf:1: expected RANKS as in '0,2-3' or '*', got '-1'"},
      {"+1 a\n", "multi-prog run.conf:1: expected RANKS as in '0,2-3' or '*', got '+1'"},
      {"1-2-3 a\n", "multi-prog run.conf:1: expected RANKS as in '0,2-3' or '*', got '1-2-3'"},
      {"*,0 a\n", "multi-prog run.conf:1: expected RANKS as in '0,2-3' or '*', got '*,0'"},
      {"0\\ a\n", "multi-prog run.conf:1: expected RANKS as in '0,2-3' or '*', got '0\\'"},
      {"0-1 a\n4 b\n", "multi-prog run.conf:2: rank 4 is out of range: the world size is 4"},
      {"2-9 a\n", "multi-prog run.conf:1: rank 9 is out of range: the world size is 4"},
      {"1-99999999999999999999 a\n",
       "multi-prog run.conf:1: rank 99999999999999999999 is out of range: the world size is 4"},
      {"0-" + std::string(40, '9') + " a\n",
       "multi-prog run.conf:1: rank 999999999999999999999999... (40 bytes) is out of range: the world size is 4"},
      {"3-1 a\n", "multi-prog run.conf:1: range '3-1' runs backwards; write '1-3'"},
      {"0-2 a\n\n2-3 b\n", "multi-prog run.conf:3: rank 2 is on line 1 and line 3"},
      {"0-1 a\n2-3 b\n# c\n1 c\n", "multi-prog run.conf:4: rank 1 is on line 1 and line 4"},
      {"0-3,1 a\n", "multi-prog run.conf:1: rank 1 is on line 1 twice"},
      {"0-2 a\n", "multi-prog run.conf: rank 3 has no line; add it or a '*' line"},
      {"0 a\n", "multi-prog run.conf: ranks 1-3 have no line; add them or a '*' line"},
      {"0 a\n3 b\n", "multi-prog run.conf: ranks 1-2 have no line; add them or a '*' line"},
      {"0 a\n* b\n* c\n", "multi-prog run.conf:3: a second '*' line (the first is line 2)"},
      {"* b\n0 a\n",
       "multi-prog run.conf:2: a line after the '*' line (line 1); '*' takes the ranks no other line names, so it "
       "comes last"},
      {"0-3\n", "multi-prog run.conf:1: '0-3' names no program (expected RANKS PROGRAM [ARGS...])"},
      {"0-3  \t\r\n", "multi-prog run.conf:1: '0-3' names no program (expected RANKS PROGRAM [ARGS...])"},
      {"*\n", "multi-prog run.conf:1: '*' names no program (expected RANKS PROGRAM [ARGS...])"},
      {"0-3 '' a\n", "multi-prog run.conf:1: the program name is empty"},
      {"0-3 a 'b c\n", "multi-prog run.conf:1: a quote (') is not closed"},
      {"0-3 a 'b \\\nc\n", "multi-prog run.conf:1: a quote (') is not closed"},
      {"3,1 a %o\n0,2 b\n",
       "multi-prog run.conf:1: ranks '3,1' are not in increasing order on a line that uses %o; write them so"},
      {std::string("0-1 a\n2-3 b\0c\n", 14), "multi-prog run.conf:2: byte 6 is \\x00, not text"},
      {"# a comment\x01\n0-3 a\n", "multi-prog run.conf:1: byte 12 is \\x01, not text"},
      {"0-3 a\rb\n", "multi-prog run.conf:1: byte 6 is \\x0d, not text"},
      {"0-3 a \\\n\x1b[2J\n", "multi-prog run.conf:2: byte 1 is \\x1b, not text"},
      {"0-3 a\x7f\n", "multi-prog run.conf:1: byte 6 is \\x7f, not text"},
      {"0-3 a " + long_arg + "\n", "multi-prog run.conf:1: the line is longer than 65536 bytes"},
      {"# " + long_arg + "\n0-3 a\n", "multi-prog run.conf:1: the line is longer than 65536 bytes"},
      {"0-3 a \\\n" + half + "\\\n" + half + "\n", "multi-prog run.conf:3: the line is longer than 65536 bytes"},
      {"", "multi-prog run.conf: no program lines (expected RANKS PROGRAM [ARGS...])"},
      {"# only\n\n  # comments\n", "multi-prog run.conf: no program lines (expected RANKS PROGRAM [ARGS...])"},
      {"0 a\n", "multi-prog run.conf: the world size is 0; it needs at least one rank", 0},
  };
  for (const Case& c : cases) {
    INFO(PrintablePrefix(c.text, 80));
    CHECK(Error(ParseMultiProg(c.text, "run.conf", c.world_size)) == c.error);
  }
}

TEST_CASE("multi-prog messages stay short and printable", "[multi_prog][bounds]") {
  // Every other rank missing: the list is cut, with the count.
  std::string even;
  for (int r = 0; r < 200; r += 2) even += (even.empty() ? "" : ",") + std::to_string(r);
  CHECK(Error(ParseMultiProg(even + " a\n", "run.conf", 200)) ==
        "multi-prog run.conf: ranks 1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33,35,37,39,41,43,45,... (100 in "
        "all) have no line; add them or a '*' line");
  // A rank field of any size is quoted in a bounded prefix, and so is a file name with control bytes.
  std::string junk(5000, 'z');
  CHECK(Error(ParseMultiProg(junk + " a\n", "run\x1b.conf", 4)) ==
        "multi-prog run\\x1b.conf:1: expected RANKS as in '0,2-3' or '*', got '" + std::string(64, 'z') +
            "... (5000 bytes)'");
}

TEST_CASE("a multi-prog table holds as many ranks as the world, and no more", "[multi_prog][bounds]") {
  // The largest worker count of one node, one line: each rank is looked at once.
  auto big = ParseMultiProg("0-65535 a\n", "run.conf", 65536);
  REQUIRE(big.ok());
  CHECK(big->group_of.size() == 65536);
  CHECK(big->groups.size() == 1);
  // A range past the world is refused before any rank of it is taken.
  CHECK(Error(ParseMultiProg("0-2147483647 a\n", "run.conf", 4)) ==
        "multi-prog run.conf:1: rank 2147483647 is out of range: the world size is 4");
}

TEST_CASE("ReadMultiProg reads a bounded regular file and never blocks", "[multi_prog][bounds]") {
  testing::TempDir dir("multi-prog");
  const std::string conf = dir / "run.conf";
  {
    std::ofstream f(conf);
    f << "0 a\n* b %o\n";
  }
  CheckTable(ReadMultiProg(conf, 3), {{1, {"a"}}, {2, {"b", "%o"}}}, {0, 1, 1}, conf);

  // The user's own file may be a symbolic link; messages name it as given.
  const std::string link = dir / "link.conf";
  REQUIRE(symlink(conf.c_str(), link.c_str()) == 0);
  CheckTable(ReadMultiProg(link, 3), {{1, {"a"}}, {2, {"b", "%o"}}}, {0, 1, 1}, link);
  CHECK(Error(ReadMultiProg(link, 0)) == "multi-prog " + link + ": the world size is 0; it needs at least one rank");

  const std::string fifo = dir / "fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(Error(ReadMultiProg(fifo, 3)) == "multi-prog " + fifo + ": a FIFO, not a regular file");
  CHECK(Error(ReadMultiProg(dir.path, 3)) == "multi-prog " + dir.path + ": a directory, not a regular file");
  CHECK(Error(ReadMultiProg(dir / "none", 3)) == "multi-prog " + dir / "none" + ": no such file");
  const std::string dangling = dir / "dangling";
  REQUIRE(symlink((dir / "gone").c_str(), dangling.c_str()) == 0);
  CHECK(Error(ReadMultiProg(dangling, 3)) == "multi-prog " + dangling + ": no such file");

  // Exactly the limit is read; a byte more is refused.
  const std::string full = dir / "full.conf";
  {
    std::ofstream f(full);
    f << "* a\n" << std::string(kMaxMultiProgBytes - 4, '\n');
  }
  CheckTable(ReadMultiProg(full, 2), {{1, {"a"}}}, {0, 0}, full);
  REQUIRE(truncate(full.c_str(), static_cast<off_t>(kMaxMultiProgBytes) + 1) == 0);
  CHECK(Error(ReadMultiProg(full, 2)) == "multi-prog " + full + ": more than 1048576 bytes");
}

}  // namespace dlaunch::launcher
