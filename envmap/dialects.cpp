// The opt-in dialects (Open MPI, Azure ML, Horovod) and torch.distributed.launch's
// --local-rank argument. Each is off by default because a worker that sees them may
// change behaviour (a real MPI_Init, for one, trusts OMPI_* and misbehaves).
#include <algorithm>
#include <string>

#include <fmt/core.h>

#include "base/defaults.hpp"
#include "envmap/host_port.hpp"
#include "envmap/worker_env.hpp"

namespace dlaunch::envmap {

using base::kHorovodStorePortOffset;

namespace {}  // namespace

EnvVars OmpiEnv(const JobLayout& layout, const WorkerSlot& slot) {
  const std::string world = std::to_string(WorldSize(layout));
  const LocalShape shape = ShapeOf(layout, slot);
  return {
      {"OMPI_COMM_WORLD_RANK", std::to_string(slot.rank)},
      {"OMPI_COMM_WORLD_SIZE", world},
      {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(shape.local_rank)},
      {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(shape.local_world_size)},
      // Open MPI defines NODE_RANK as the rank among processes on the same node,
      // i.e. the local rank; it is not the index of the node.
      {"OMPI_COMM_WORLD_NODE_RANK", std::to_string(shape.local_rank)},
      {"OMPI_UNIVERSE_SIZE", world},
  };
}

EnvVars AzureEnv(const JobLayout& layout, const Flavors& flavors) {
  EnvVars env = {{"AZ_BATCHAI_MPI_MASTER_NODE", layout.master_addr}};
  // Azure ML sets the addr:port form only for multi-node jobs, and scripts use its
  // presence to tell the two apart.
  if (layout.nodes.size() > 1) {
    env.emplace_back("AZ_BATCH_MASTER_NODE", JoinHostPort(layout.master_addr, layout.master_port));
  }
  if (!flavors.azure_hostfile.empty()) env.emplace_back("AZUREML_MPI_HOSTFILE", flavors.azure_hostfile);
  return env;
}

int HorovodStorePort(const JobLayout& layout) { return layout.master_port + kHorovodStorePortOffset; }

std::string HorovodHostName(const JobLayout& layout, int node_rank) {
  const std::string& host = layout.nodes[static_cast<size_t>(node_rank)].host;
  int same = 0;
  for (const Node& n : layout.nodes) same += n.host == host ? 1 : 0;
  return same > 1 ? fmt::format("{}-{}", host, node_rank) : host;
}

EnvVars HorovodEnv(const JobLayout& layout, const WorkerSlot& slot, const Flavors& flavors) {
  const LocalShape shape = ShapeOf(layout, slot);
  int cross_rank = shape.node_rank;
  int cross_size = shape.nnodes;
  if (!layout.process_view) {
    // horovodrun's hosts.py: a local rank's cross group is the nodes that have it.
    cross_rank = cross_size = 0;
    for (size_t i = 0; i < layout.nodes.size(); ++i) {
      if (layout.nodes[i].nproc <= shape.local_rank) continue;
      if (static_cast<int>(i) < layout.node_rank) ++cross_rank;
      ++cross_size;
    }
  }
  EnvVars env = {
      {"HOROVOD_RANK", std::to_string(slot.rank)},
      {"HOROVOD_SIZE", std::to_string(WorldSize(layout))},
      {"HOROVOD_LOCAL_RANK", std::to_string(shape.local_rank)},
      {"HOROVOD_LOCAL_SIZE", std::to_string(shape.local_world_size)},
      {"HOROVOD_CROSS_RANK", std::to_string(cross_rank)},
      {"HOROVOD_CROSS_SIZE", std::to_string(cross_size)},
      {"HOROVOD_HOSTNAME", layout.process_view ? layout.nodes[static_cast<size_t>(layout.node_rank)].host
                                               : HorovodHostName(layout, layout.node_rank)},
  };
  if (layout.process_view || layout.master_port <= 0) return env;
  env.emplace_back("HOROVOD_GLOO_RENDEZVOUS_ADDR", layout.master_addr);
  env.emplace_back("HOROVOD_GLOO_RENDEZVOUS_PORT", std::to_string(HorovodStorePort(layout)));
  env.emplace_back("HOROVOD_CONTROLLER", "gloo");
  env.emplace_back("HOROVOD_CPU_OPERATIONS", "gloo");
  if (!flavors.horovod_iface.empty()) env.emplace_back("HOROVOD_GLOO_IFACE", flavors.horovod_iface);
  return env;
}

std::vector<std::pair<std::string, int>> HorovodScopes(const JobLayout& layout) {
  const int world = WorldSize(layout);
  std::vector<std::pair<std::string, int>> scopes = {{"global", world}, {"global_", world}};
  int widest = 0;
  for (size_t i = 0; i < layout.nodes.size(); ++i) {
    const int nproc = layout.nodes[i].nproc;
    scopes.emplace_back("local_" + HorovodHostName(layout, static_cast<int>(i)), nproc);
    widest = std::max(widest, nproc);
  }
  // The old spelling after the new: a host named "1" keeps its own size.
  for (size_t i = 0; i < layout.nodes.size(); ++i)
    scopes.emplace_back(fmt::format("local_{}", i), layout.nodes[i].nproc);
  for (int local = 0; local < widest; ++local) {
    int nodes = 0;
    for (const Node& n : layout.nodes) nodes += n.nproc > local ? 1 : 0;
    scopes.emplace_back(fmt::format("cross_{}", local), nodes);
  }
  return scopes;
}

std::string AzureHostfile(const JobLayout& layout) {
  std::string text;
  for (const Node& node : layout.nodes) text += fmt::format("{} slots={}\n", node.addr, node.nproc);
  return text;
}

std::vector<std::string> LocalRankArgs(const JobLayout& layout, const WorkerSlot& slot, LocalRankArg style) {
  const int local_rank = ShapeOf(layout, slot).local_rank;
  switch (style) {
    case LocalRankArg::kDash:
      return {fmt::format("--local-rank={}", local_rank)};
    case LocalRankArg::kUnderscore:
      return {fmt::format("--local_rank={}", local_rank)};
    case LocalRankArg::kNone:
      break;
  }
  return {};
}

}  // namespace dlaunch::envmap
