#include "rendezvous/ranks.hpp"

#include <algorithm>
#include <numeric>
#include <set>

#include <fmt/format.h>

namespace dlaunch::rendezvous {
namespace {

bool Names(const Join& join, const std::string& entry) {
  return join.host == entry || std::find(join.addrs.begin(), join.addrs.end(), entry) != join.addrs.end();
}

Result<int> ClaimFromList(const Join& join, const NodeList& node_list, const std::map<int, std::string>& taken) {
  const std::vector<std::string>& list = node_list.hosts();
  if (join.list_position >= 0) {
    int pos = join.list_position;
    if (static_cast<std::size_t>(pos) >= list.size()) {
      return Status::InvalidArgument(
          fmt::format("list position {} is outside the node list of {} hosts", pos, list.size()));
    }
    const std::string& entry = list[static_cast<std::size_t>(pos)];
    if (!Names(join, entry)) {
      return Status::InvalidArgument(
          fmt::format("list position {} is '{}' in the node list, not '{}'", pos, entry, join.host));
    }
    if (auto it = taken.find(pos); it != taken.end()) {
      return Status::InvalidArgument(
          fmt::format("node list position {} ('{}') is already taken by host '{}'", pos, entry, it->second));
    }
    return pos;
  }
  // The positions that name it (its host or any of its addresses), lowest first;
  // the first one free is its own.
  std::vector<int> named = node_list.PositionsOf(join.host);
  for (const std::string& addr : join.addrs) {
    const std::vector<int>& more = node_list.PositionsOf(addr);
    named.insert(named.end(), more.begin(), more.end());
  }
  std::sort(named.begin(), named.end());
  for (int i : named)
    if (!taken.count(i)) return i;
  if (named.empty()) {
    return Status::InvalidArgument(fmt::format("host '{}' is not in the node list ({})", join.host, NameList(list)));
  }
  return Status::InvalidArgument(fmt::format("every node list position of host '{}' is already taken", join.host));
}

}  // namespace

std::string NameList(const std::vector<std::string>& names, std::size_t limit) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < limit; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > limit) out += fmt::format(", ... ({} in all)", names.size());
  return out;
}

NodeList::NodeList(std::vector<std::string> hosts) : hosts_(std::move(hosts)) {
  for (std::size_t i = 0; i < hosts_.size(); ++i) positions_[hosts_[i]].push_back(static_cast<int>(i));
}

const std::vector<int>& NodeList::PositionsOf(const std::string& name) const {
  static const std::vector<int> kNone;
  auto it = positions_.find(name);
  return it == positions_.end() ? kNone : it->second;
}

Result<int> ClaimSlot(const Join& join, const NodeList& node_list, int max_nodes,
                      const std::map<int, std::string>& taken) {
  if (!node_list.empty()) return ClaimFromList(join, node_list, taken);
  if (join.list_position >= 0) {
    // The agent has a node list the coordinator lacks: trust its position.
    if (join.list_position >= max_nodes) {
      return Status::InvalidArgument(fmt::format("list position {} is outside 0..{} (at most {} nodes)",
                                                 join.list_position, max_nodes - 1, max_nodes));
    }
    if (auto it = taken.find(join.list_position); it != taken.end()) {
      return Status::InvalidArgument(
          fmt::format("list position {} is already taken by host '{}'", join.list_position, it->second));
    }
    return join.list_position;
  }
  int rank = join.requested_node_rank;
  if (rank < 0) return -1;
  if (rank >= max_nodes) {
    return Status::InvalidArgument(
        fmt::format("node rank {} is outside 0..{} (at most {} nodes)", rank, max_nodes - 1, max_nodes));
  }
  if (auto it = taken.find(rank); it != taken.end()) {
    return Status::InvalidArgument(fmt::format("node rank {} is already taken by host '{}'", rank, it->second));
  }
  return rank;
}

std::vector<int> NodeRanks(const std::vector<RankClaim>& claims) {
  std::set<int> fixed;
  for (const RankClaim& c : claims)
    if (c.slot >= 0) fixed.insert(c.slot);

  std::vector<std::size_t> arrivals;
  for (std::size_t i = 0; i < claims.size(); ++i)
    if (claims[i].slot < 0) arrivals.push_back(i);
  std::sort(arrivals.begin(), arrivals.end(),
            [&](std::size_t a, std::size_t b) { return claims[a].arrival < claims[b].arrival; });

  // Slots: fixed ones as claimed, the rest fill the lowest free slots.
  std::vector<int> slot(claims.size());
  int next = 0;
  for (std::size_t i : arrivals) {
    while (fixed.count(next)) ++next;
    slot[i] = next++;
  }
  for (std::size_t i = 0; i < claims.size(); ++i)
    if (claims[i].slot >= 0) slot[i] = claims[i].slot;

  // Close the gaps: rank = place in slot order.
  std::vector<std::size_t> order(claims.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return slot[a] < slot[b]; });
  std::vector<int> ranks(claims.size());
  for (std::size_t r = 0; r < order.size(); ++r) ranks[order[r]] = static_cast<int>(r);
  return ranks;
}

}  // namespace dlaunch::rendezvous
