#include "rendezvous/generation.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "rendezvous/ranks.hpp"

namespace dlaunch::rendezvous {

Generation PlanGeneration(const std::vector<GenerationMember>& members, const GenerationSettings& settings) {
  Generation g;
  std::vector<RankClaim> claims;
  for (const GenerationMember& m : members) claims.push_back({m.slot, m.arrival});
  g.node_ranks = NodeRanks(claims);

  g.table.assign(members.size(), envmap::Node{});
  const Join* node0 = nullptr;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const Join& join = *members[i].join;
    g.table[static_cast<std::size_t>(g.node_ranks[i])] =
        envmap::Node{join.host, join.addrs.front(), join.nproc, join.task_ports};
    if (g.node_ranks[i] == 0) node0 = &join;
  }
  // Only agents that asked for the whole table receive it; without one, no copy
  // of it is made (100,000 nodes of it are megabytes).
  bool any_table = std::any_of(members.begin(), members.end(), [](const auto& m) { return m.join->wants_table; });
  Assignment& a = g.whole;
  a.generation = settings.number;
  if (any_table) a.nodes = g.table;
  a.master_addr = g.table.front().addr;
  a.master_port = settings.master_port;
  if (a.master_port == 0) a.master_port = node0->master_port_hint;
  if (a.master_port == 0) a.master_port = settings.default_master_port;
  a.run_id = settings.run_id;
  a.restart_count = settings.restart_count;
  // Each Join's nproc is capped, but the sum of many is not: refuse a world size
  // that would overflow the int fields of Assignment and WORLD_SIZE.
  std::int64_t total = 0;
  for (const envmap::Node& node : g.table) total += node.nproc;
  if (total > std::numeric_limits<std::int32_t>::max()) {
    g.problem = fmt::format("{} nodes ask for {} workers in all, over the cap of {}", g.table.size(), total,
                            std::numeric_limits<std::int32_t>::max());
    return g;
  }
  if (std::size_t size = any_table ? PayloadSize(a) : 0; size > kMaxPayload) {
    g.problem = fmt::format("the node table of {} nodes takes {} bytes, over the frame cap of {}", g.table.size(), size,
                            kMaxPayload);
    return g;
  }
  g.rank_offsets.assign(g.table.size(), 0);
  for (std::size_t r = 0; r < g.table.size(); ++r) {
    g.rank_offsets[r] = g.workers;
    g.workers += g.table[r].nproc;
  }
  a.nnodes = static_cast<int>(g.table.size());
  a.world_size = g.workers;
  g.own_row = a;
  g.own_row.nodes.clear();
  return g;
}

Assignment AssignmentFor(const Generation& generation, int node_rank, bool wants_table) {
  auto r = static_cast<std::size_t>(node_rank);
  Assignment out = wants_table ? generation.whole : generation.own_row;
  if (!wants_table) out.nodes = {generation.table[r]};
  if (wants_table && out.nodes.empty()) out.nodes = generation.table;  // no member asked for it at the plan
  out.node_rank = node_rank;
  out.rank_offset = generation.rank_offsets[r];
  return out;
}

}  // namespace dlaunch::rendezvous
