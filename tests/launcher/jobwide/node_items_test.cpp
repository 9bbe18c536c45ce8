// The one reading of a job-wide answer's items (launcher/jobwide/node_items.hpp)
// that the hang report and the live view share: silent nodes named, bad items
// counted against their node, the rest by rank.
#include "launcher/jobwide/node_items.hpp"

#include <catch2/catch.hpp>

namespace dlaunch::launcher {
namespace {

namespace rdzv = dlaunch::rendezvous;

rdzv::NodeStacks ItemNode(int node_rank, const std::string& host, int first, int nproc,
                          std::vector<std::string> items) {
  return rdzv::NodeStacks{node_rank, host, first, nproc, true, "", std::move(items)};
}

// An item "R:TEXT" is TEXT at rank R; anything else is not an item.
Result<RankedItem<std::string>> ParseTestItem(const std::string& item) {
  std::size_t colon = item.find(':');
  if (colon == std::string::npos || colon == 0) return Status::InvalidArgument("no rank");
  return RankedItem<std::string>{std::stoll(item.substr(0, colon)), item.substr(colon + 1)};
}

std::vector<std::string> ReadTestItems(const std::vector<rdzv::NodeStacks>& nodes, const ItemWords& words,
                                       std::vector<std::string>& problems) {
  std::function<Result<RankedItem<std::string>>(const std::string&)> parse = ParseTestItem;
  return ItemsByRank(nodes, words, parse, problems);
}

}  // namespace

TEST_CASE("node items: every node's items come out by rank, equal ranks in node order", "[node_items]") {
  std::vector<std::string> problems;
  std::vector<std::string> got =
      ReadTestItems({ItemNode(0, "a", 0, 2, {"1:a1", "0:a0"}), ItemNode(1, "b", 2, 2, {"3:b3", "2:b2"})},
                    {"", "answer", "row"}, problems);
  CHECK(got == std::vector<std::string>{"a0", "a1", "b2", "b3"});
  CHECK(problems.empty());
  // Two nodes that claim the same ranks (a coordinator's bug): both kept, stable.
  got = ReadTestItems({ItemNode(0, "a", 0, 1, {"0:first"}), ItemNode(1, "b", 0, 1, {"0:second"})},
                      {"", "answer", "row"}, problems);
  CHECK(got == std::vector<std::string>{"first", "second"});
}

TEST_CASE("node items: a bad item is refused and counted, naming the first", "[node_items]") {
  std::vector<std::string> problems;
  std::vector<std::string> got =
      ReadTestItems({ItemNode(1, "b", 2, 2, {"junk", "7:x", "2:keep", "2:again", "1:low", "3:keep3"})},
                    {"not sampled", "report", "stack"}, problems);
  CHECK(got == std::vector<std::string>{"keep", "keep3"});
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "node 1 (b): 4 items of its report are not a stack (item 0: no rank)");

  problems.clear();
  ReadTestItems({ItemNode(0, "a", 0, 2, {"0:ok", "5:x"})}, {"", "answer", "row"}, problems);
  CHECK(problems == std::vector<std::string>{"node 0 (a): 1 item of its answer is not a row (item 1: rank 5 is not "
                                             "one of its ranks 0-1)"});
  problems.clear();
  ReadTestItems({ItemNode(0, "a", 4, 1, {"4:ok", "4:x"})}, {"", "answer", "row"}, problems);
  CHECK(problems == std::vector<std::string>{"node 0 (a): 1 item of its answer is not a row (item 1: rank 4 comes "
                                             "twice)"});
}

TEST_CASE("node items: a silent node is named with its ranks, in each kind's words", "[node_items]") {
  rdzv::NodeStacks silent{2, "c", 4, 3, false, "no answer within 15s", {"4:ignored"}};
  rdzv::NodeStacks one{3, "d", 7, 1, false, "lost (connection closed)", {}};
  std::vector<std::string> problems;
  CHECK(ReadTestItems({silent, one}, {"not sampled", "report", "stack"}, problems).empty());
  CHECK(problems == std::vector<std::string>{"node 2 (c), ranks 4-6: not sampled (no answer within 15s)",
                                             "node 3 (d), rank 7: not sampled (lost (connection closed))"});
  problems.clear();
  ReadTestItems({silent}, {"", "answer", "row"}, problems);
  CHECK(problems == std::vector<std::string>{"node 2 (c), ranks 4-6: no answer within 15s"});
}

TEST_CASE("node items: a rank near the int limits is checked without overflow", "[node_items]") {
  NodeItemCheck check(ItemNode(0, "a", 2147483646, 2, {}));
  CHECK(check.Take(2147483647).ok());
  CHECK(check.Take(2147483648).message() == "rank 2147483648 is not one of its ranks 2147483646-2147483647");
  CHECK(check.Take(-1).message() == "rank -1 is not one of its ranks 2147483646-2147483647");
  CHECK(check.RefusedLine({"", "answer", "row"}).empty());
}

}  // namespace dlaunch::launcher
