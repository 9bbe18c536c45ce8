// The opt-in dialects (Open MPI, Azure ML, Horovod) and torch.distributed.launch's
// --local-rank argument. Each is off by default because a worker that sees them may
// change behaviour (a real MPI_Init, for one, trusts OMPI_* and misbehaves).
#include <string>

#include <fmt/core.h>

#include "envmap/host_port.hpp"
#include "envmap/worker_env.hpp"

namespace dlaunch::envmap {

namespace {


}  // namespace

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

EnvVars HorovodEnv(const JobLayout& layout, const WorkerSlot& slot) {
  const LocalShape shape = ShapeOf(layout, slot);
  return {
      {"HOROVOD_RANK", std::to_string(slot.rank)},
      {"HOROVOD_SIZE", std::to_string(WorldSize(layout))},
      {"HOROVOD_LOCAL_RANK", std::to_string(shape.local_rank)},
      {"HOROVOD_LOCAL_SIZE", std::to_string(shape.local_world_size)},
      {"HOROVOD_CROSS_RANK", std::to_string(shape.node_rank)},
      {"HOROVOD_CROSS_SIZE", std::to_string(shape.nnodes)},
      {"HOROVOD_HOSTNAME", layout.nodes[static_cast<size_t>(layout.node_rank)].host},
  };
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
