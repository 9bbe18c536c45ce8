// The items of a job-wide answer, checked against the node that sent them. The
// coordinator hands back each node's items unchecked (rendezvous::NodeStacks):
// the stacks of a hang report (job_hang.hpp) and the rows or stacks of a live
// query (live/job_live.hpp). Both read them one way: a node that did not answer is
// named, an item that does not parse, names a rank that is not one of its node's,
// or repeats one is refused and counted, and what is left comes out by rank.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.hpp"
#include "rendezvous/coordinator.hpp"

namespace dlaunch::launcher {

// "rank 4" or "ranks 4-6": a node's `n` ranks from `first`.
std::string RankSpan(int first, int n);

// How the lines about one kind of answer read.
struct ItemWords {
  // Before a silent node's problem: "not sampled" gives "node 2 (c), ranks 4-6:
  // not sampled (no answer within 15s)"; empty gives "...: no answer within 2s".
  std::string_view unanswered;
  std::string_view answer;  // "report": "node 1 (b): 3 items of its report are not a stack (...)"
  std::string_view item;    // "stack"
};

// One item, parsed, with the rank it names.
template <typename T>
struct RankedItem {
  int64_t rank = 0;
  T value;
};

// The checks on one answering node's items, in the order they come.
class NodeItemCheck {
 public:
  // Keeps what it needs of `node` (not its items).
  explicit NodeItemCheck(const rendezvous::NodeStacks& node)
      : node_rank_(node.node_rank), host_(node.host), first_rank_(node.first_rank), nproc_(node.nproc) {}
  // Ok when `rank` is one of the node's and the first item naming it; else
  // InvalidArgument saying why ("rank 7 is not one of its ranks 2-3", "rank 2
  // comes twice").
  Status Take(int64_t rank);
  // Counts item `index` as refused, for `why`.
  void Refuse(std::size_t index, const std::string& why);
  // "node 1 (b): 3 items of its report are not a stack (item 0: not JSON: ...)",
  // naming the first refusal; empty when none.
  std::string RefusedLine(const ItemWords& words) const;

 private:
  int node_rank_;
  std::string host_;
  int first_rank_;
  int nproc_;
  std::set<int64_t> seen_;
  std::size_t refused_ = 0;
  std::string first_;
};

// "node 2 (c), ranks 4-6: not sampled (no answer within 15s)": the line for a
// node that did not answer.
std::string UnansweredLine(const rendezvous::NodeStacks& node, const ItemWords& words);

// Every node's items that `parse` accepts and NodeItemCheck lets through, by rank
// (stable: equal ranks keep their order). `parse` reads rendezvous input: it must
// be bounded and never throw; its failure's message says why the item is not one.
// `problems` gets UnansweredLine for each silent node and RefusedLine for each
// node with refused items, in node order.
template <typename T>
std::vector<T> ItemsByRank(const std::vector<rendezvous::NodeStacks>& nodes, const ItemWords& words,
                           const std::function<Result<RankedItem<T>>(const std::string&)>& parse,
                           std::vector<std::string>& problems) {
  std::vector<RankedItem<T>> kept;
  for (const rendezvous::NodeStacks& node : nodes) {
    if (!node.answered) {
      problems.push_back(UnansweredLine(node, words));
      continue;
    }
    NodeItemCheck check(node);
    for (std::size_t i = 0; i < node.items.size(); ++i) {
      Result<RankedItem<T>> item = parse(node.items[i]);
      Status taken = item.ok() ? check.Take(item->rank) : item.status();
      if (!taken.ok()) {
        check.Refuse(i, taken.message());
        continue;
      }
      kept.push_back(std::move(*item));
    }
    if (std::string line = check.RefusedLine(words); !line.empty()) problems.push_back(std::move(line));
  }
  std::stable_sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  std::vector<T> out;
  out.reserve(kept.size());
  for (RankedItem<T>& k : kept) out.push_back(std::move(k.value));
  return out;
}

}  // namespace dlaunch::launcher
