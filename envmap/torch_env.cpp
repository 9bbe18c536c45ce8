// The PyTorch (torchrun) variables, and WorkerEnv, which joins every dialect.
#include <optional>
#include <string>

#include <fmt/core.h>

#include "envmap/worker_env.hpp"

namespace dlaunch::envmap {

namespace {

void Append(EnvVars& env, EnvVars more) {
  for (auto& kv : more) env.push_back(std::move(kv));
}

}  // namespace

std::optional<std::string> VirtualGpu(const EnvMap& inherited, int local_rank) {
  auto it = inherited.find("CUDA_VISIBLE_DEVICES");
  if (it == inherited.end()) return std::to_string(local_rank);
  int i = 0;
  size_t start = 0;
  const std::string& list = it->second;
  while (true) {
    size_t comma = list.find(',', start);
    if (i == local_rank) {
      std::string id = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      // Python's str.strip(): every kind of whitespace at either end.
      size_t first = id.find_first_not_of(" \t\n\r\f\v");
      if (first == std::string::npos) return std::string();
      return id.substr(first, id.find_last_not_of(" \t\n\r\f\v") - first + 1);
    }
    if (comma == std::string::npos) return std::nullopt;
    start = comma + 1;
    ++i;
  }
}

EnvVars TorchEnv(const JobLayout& layout, const WorkerSlot& slot, const Flavors& flavors, const EnvMap& inherited) {
  const auto [local_rank, local_world, node_rank, nnodes] = ShapeOf(layout, slot);
  EnvVars env = {
      {"RANK", std::to_string(slot.rank)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"WORLD_SIZE", std::to_string(WorldSize(layout))},
      {"LOCAL_WORLD_SIZE", std::to_string(local_world)},
      {"GROUP_RANK", std::to_string(node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(nnodes)},
      // Lightning reads NODE_RANK rather than torchrun's GROUP_RANK.
      {"NODE_RANK", std::to_string(node_rank)},
      {"ROLE_NAME", slot.role},
      {"ROLE_RANK", std::to_string(slot.role_rank)},
      {"ROLE_WORLD_SIZE", std::to_string(slot.role_world_size)},
      {"MASTER_ADDR", layout.master_addr},
      {"MASTER_PORT", std::to_string(layout.master_port)},
      {"TORCHELASTIC_RUN_ID", layout.run_id},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(layout.restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(layout.max_restarts)},
      // torch compares it with str(True), so the capitalisation matters.
      {"TORCHELASTIC_USE_AGENT_STORE", layout.agent_store ? "True" : "False"},
  };
  if (flavors.virtual_local_rank) {
    Override(env, "LOCAL_RANK", "0");
    // Plans check the list first; a short one leaves the inherited value.
    if (std::optional<std::string> gpu = VirtualGpu(inherited, local_rank))
      env.emplace_back("CUDA_VISIBLE_DEVICES", *gpu);
  }
  if (!flavors.error_file.empty()) env.emplace_back("TORCHELASTIC_ERROR_FILE", flavors.error_file);
  // torchrun caps OpenMP at one thread per worker only when several workers share a
  // node, and never overrides a value the user chose.
  if (local_world > 1 && !inherited.contains("OMP_NUM_THREADS")) env.emplace_back("OMP_NUM_THREADS", "1");
  // torch 2.x reads TORCH_NCCL_*, 1.x only the old name; set both for either.
  for (const char* name : {"NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING"}) {
    if (!inherited.contains(name)) env.emplace_back(name, "1");
  }
  return env;
}

EnvVars PerNodeEnv(const JobLayout& layout, const Flavors& flavors) {
  const std::string node_rank = std::to_string(layout.node_rank);
  const std::string nnodes = std::to_string(static_cast<int>(layout.nodes.size()));
  EnvVars env = {
      {"NODE_RANK", node_rank},
      {"GROUP_RANK", node_rank},
      {"NNODES", nnodes},
      {"GROUP_WORLD_SIZE", nnodes},
      {"MASTER_ADDR", layout.master_addr},
      {"MASTER_PORT", std::to_string(layout.master_port)},
  };
  Append(env, AzureEnv(layout, flavors));
  return env;
}

EnvVars WorkerEnv(const JobLayout& layout, const WorkerSlot& slot, const Flavors& flavors, const EnvMap& inherited) {
  EnvVars env = flavors.per_node ? PerNodeEnv(layout, flavors) : TorchEnv(layout, slot, flavors, inherited);
  if (!layout.roles.empty()) env.emplace_back("TF_CONFIG", TfConfig(layout, slot));
  if (flavors.ompi) Append(env, OmpiEnv(layout, slot));
  if (flavors.azure && !flavors.per_node) Append(env, AzureEnv(layout, flavors));
  if (flavors.horovod) Append(env, HorovodEnv(layout, slot, flavors));
  if (!flavors.progress_file.empty()) env.emplace_back(kProgressFileVar, flavors.progress_file);
  // Seed 000: a role's own variables override the job's (ps gets MAGIC=newnumber).
  for (const RoleSpec& role : layout.roles) {
    if (role.name != slot.role) continue;
    for (const auto& [name, value] : role.env) Override(env, name, value);
  }
  return env;
}

}  // namespace dlaunch::envmap
