#include "launcher/watchdog/proc_table.hpp"

#include <unistd.h>

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/launcher/process/process_checks.hpp"

using namespace dlaunch::launcher;
using dlaunch::testing::Contains;

namespace {

constexpr const char* kStatTail =
    " 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 1 0 44732 3133440 407 18446744073709551615 0 0 0";

}  // namespace

TEST_CASE("ParseStat reads pid, parent, group, session, state and start time", "[proc_table]") {
  auto s = ParseStat(std::string("12299 (cat) R 12294 12290 5996") + kStatTail + "\n");
  REQUIRE(s.ok());
  CHECK(s->pid == 12299);
  CHECK(s->state == 'R');
  CHECK(s->ppid == 12294);
  CHECK(s->pgid == 12290);
  CHECK(s->sid == 5996);
  CHECK(s->start_time == 44732);

  // A command name may hold spaces and parentheses: fields count from the last ')'.
  auto odd = ParseStat(std::string("7 (a) S 1 (b c)) S 3 4 5") + kStatTail);
  REQUIRE(odd.ok());
  CHECK(odd->ppid == 3);
  CHECK(odd->pgid == 4);
  CHECK(odd->sid == 5);
}

TEST_CASE("ParseStat refuses what is not a stat line", "[proc_table]") {
  struct Case {
    std::string text, message;
  };
  for (const Case& c : std::vector<Case>{
           {"", "/proc stat: no command name in ''"},
           {"12 cat R 1 2 3", "/proc stat: no command name in '12 cat R 1 2 3'"},
           {"x (cat) R 1 2 3", "/proc stat: bad pid in 'x (cat) R 1 2 3'"},
           {"12 (cat) R 1 2 3", "/proc stat: too few fields in '12 (cat) R 1 2 3'"},
           {std::string("12 (cat) R -1 2 3") + kStatTail,
            "/proc stat: bad ppid, pgrp or session in '12 (cat) R -1 2 3 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 1 0 "
            "44732 3133440 407 18446'"},
       }) {
    auto s = ParseStat(c.text);
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().message() == c.message);
  }
}

TEST_CASE("Descendants walks the tree below a pid, parents first, leaving out one subtree", "[proc_table]") {
  auto p = [](int pid, int ppid) {
    ProcStat s;
    s.pid = pid;
    s.ppid = ppid;
    return s;
  };
  std::vector<ProcStat> table{p(1, 0), p(10, 1), p(11, 10), p(12, 11), p(13, 10), p(20, 1), p(21, 20), p(30, 99)};
  CHECK(Descendants(table, 10) == std::vector<int>{11, 13, 12});
  std::vector<int> all = Descendants(table, 1, 20);
  CHECK(all.size() == 4);
  CHECK_FALSE(dlaunch::testing::Contains(all, 20));
  CHECK_FALSE(dlaunch::testing::Contains(all, 21));
  CHECK(Descendants(table, 12).empty());
  // A table read while processes come and go may hold a cycle; the walk still ends.
  CHECK(Descendants({p(5, 6), p(6, 5)}, 5) == std::vector<int>{6});
}

TEST_CASE("ReadProcFile reads a file whole, or up to its limit, and says when it cannot open it", "[proc_table]") {
  std::optional<std::string> stat = ReadProcFile("/proc/self/stat");
  REQUIRE(stat.has_value());
  CHECK(ParseStat(*stat).ok());
  CHECK(ParseStat(*stat)->pid == getpid());
  std::optional<std::string> head = ReadProcFile("/proc/self/maps", 10);
  REQUIRE(head.has_value());
  CHECK(head->size() == 10);
  CHECK(ReadProcFile("/proc/self/maps", 1 << 20)->size() > 10);
  CHECK(!ReadProcFile("/proc/999999999/stat").has_value());
}
