// Node rank rules, as pure functions (the coordinator applies them).
//
// A node gets its rank from, in order of precedence:
//   1. its position in the node list (--nodes / --hostfile), when there is one;
//   2. else its explicit --node-rank;
//   3. else the order in which the coordinator received the Join messages.
// Rules 1 and 2 claim a fixed "slot" when the node joins, so a conflict is refused
// at once. At assignment, nodes with a slot keep the slot order, the others fill the
// lowest free slots in arrival order, and then any gap (a slot whose node never
// came, or left) closes up: ranks keep their order and become 0..n-1.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.hpp"
#include "rendezvous/codec.hpp"

namespace dlaunch::rendezvous {

struct RankClaim {
  int slot = -1;              // a fixed slot (rule 1 or 2); -1 for arrival order
  std::uint64_t arrival = 0;  // the sequence number of its Join; unique
};

// The node rank of each claim, in the same order. Slots must be distinct.
std::vector<int> NodeRanks(const std::vector<RankClaim>& claims);

// A node list (--nodes / --hostfile) with the positions of each name in it, so
// that a join finds its own positions by a lookup rather than a walk of the
// list: N joins against a list of N cost O(N), not O(N^2).
class NodeList {
 public:
  NodeList() = default;
  NodeList(std::vector<std::string> hosts);  // NOLINT: implicit, a plain list is indexed for the call
  const std::vector<std::string>& hosts() const { return hosts_; }
  bool empty() const { return hosts_.empty(); }
  // Positions of `name`, ascending; empty when it is not listed.
  const std::vector<int>& PositionsOf(const std::string& name) const;

 private:
  std::vector<std::string> hosts_;
  std::unordered_map<std::string, std::vector<int>> positions_;
};

// The slot that `join` claims, or -1 when it claims none. `taken` maps the slots
// already held by live agents to their hosts. With a node list, the host or any of
// the join's addresses must be in it; a host listed several times (several agents
// on one machine) takes the position the agent named (list_position) or else the
// first free one. Fails with InvalidArgument whose message is the problem alone,
// e.g. "node rank 1 is already taken by host 'b'"; the caller adds the subject.
Result<int> ClaimSlot(const Join& join, const NodeList& node_list, int max_nodes,
                      const std::map<int, std::string>& taken);

// "a, b, c", or the first `limit` names and "... (10 in all)".
std::string NameList(const std::vector<std::string>& names, std::size_t limit = 8);

}  // namespace dlaunch::rendezvous
