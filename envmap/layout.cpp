#include "envmap/layout.hpp"

#include <array>
#include <set>

#include <fmt/core.h>

namespace dlaunch::envmap {

namespace {

// The task types TensorFlow's cluster resolver understands. Anything else would end
// up in TF_CONFIG and only fail later, inside the worker, with a less useful message.
constexpr std::array<const char*, 4> kKnownRoles = {"chief", "worker", "ps", "evaluator"};

bool IsKnownRole(const std::string& name) {
  for (const char* known : kKnownRoles) {
    if (name == known) return true;
  }
  return false;
}

int RoleCount(const JobLayout& layout, const std::string& name) {
  int count = 0;
  for (const RoleSpec& role : layout.roles) {
    if (role.name == name) count += role.count;
  }
  return count;
}

std::string NodeName(const JobLayout& layout, size_t node_rank) {
  return fmt::format("node {} ({})", node_rank, layout.nodes[node_rank].host);
}

Status ValidateNodes(const JobLayout& layout) {
  if (layout.nodes.empty()) return Status::InvalidArgument("layout: the job has no nodes");
  const int nnodes = static_cast<int>(layout.nodes.size());
  if (layout.node_rank < 0 || layout.node_rank >= nnodes) {
    return Status::InvalidArgument(fmt::format("--node-rank: {} is out of range (the job has {} node{})",
                                               layout.node_rank, nnodes, nnodes == 1 ? "" : "s"));
  }
  for (size_t i = 0; i < layout.nodes.size(); ++i) {
    const Node& node = layout.nodes[i];
    if (node.nproc < 1) {
      return Status::InvalidArgument(
          fmt::format("{}: {} worker processes (need at least 1)", NodeName(layout, i), node.nproc));
    }
    if (!node.task_ports.empty() && static_cast<int>(node.task_ports.size()) != node.nproc) {
      return Status::InvalidArgument(fmt::format("{}: {} task ports for {} worker processes", NodeName(layout, i),
                                                 node.task_ports.size(), node.nproc));
    }
  }
  return Status::Ok();
}

Status ValidateRoles(const JobLayout& layout) {
  std::set<std::string> seen;
  int total = 0;
  for (const RoleSpec& role : layout.roles) {
    if (!IsKnownRole(role.name)) {
      return Status::InvalidArgument(
          fmt::format("--roles: unknown role '{}' (expected chief, worker, ps or evaluator)", role.name));
    }
    if (role.count < 1) {
      return Status::InvalidArgument(
          fmt::format("--roles: '{}' has count {} (need at least 1)", role.name, role.count));
    }
    // A role listed twice would give two tasks the same (type, index) in TF_CONFIG.
    if (!seen.insert(role.name).second) {
      return Status::InvalidArgument(fmt::format("--roles: '{}' is listed twice", role.name));
    }
    total += role.count;
  }
  // TensorFlow rejects a cluster with several chiefs or evaluators only once the
  // workers have started; catch it before anything is spawned.
  for (const char* single : {"chief", "evaluator"}) {
    int count = RoleCount(layout, single);
    if (count > 1) {
      return Status::InvalidArgument(fmt::format("--roles: at most one {}, got {}", single, count));
    }
  }
  const int world = WorldSize(layout);
  if (total != world) {
    return Status::InvalidArgument(
        fmt::format("--roles: counts add up to {} but the job has {} processes", total, world));
  }
  // ParameterServerStrategy's coordinator hands work to workers; with ps and no
  // worker it waits forever instead of failing.
  if (RoleCount(layout, "ps") > 0 && RoleCount(layout, "worker") == 0) {
    return Status::InvalidArgument("--roles: a ps role needs at least one worker");
  }
  for (size_t i = 0; i < layout.nodes.size(); ++i) {
    if (layout.nodes[i].task_ports.empty()) {
      return Status::InvalidArgument(fmt::format("--roles: every task needs its own port (node {} has none)", i));
    }
  }
  return Status::Ok();
}

}  // namespace

const std::string* Find(const EnvVars& vars, const std::string& name) {
  for (const auto& [key, value] : vars) {
    if (key == name) return &value;
  }
  return nullptr;
}

void Override(EnvVars& vars, const std::string& name, const std::string& value) {
  std::erase_if(vars, [&](const auto& kv) { return kv.first == name; });
  vars.emplace_back(name, value);
}

Result<std::vector<Node>> PartialTable(int nnodes, int node_rank, const Node& own, int rank_offset, int world_size) {
  int before = node_rank, after = nnodes - node_rank - 1;
  int rest = world_size - rank_offset - own.nproc;
  if (nnodes < 1 || node_rank < 0 || after < 0 || own.nproc < 1 || rank_offset < before || rest < after ||
      (before == 0 && rank_offset != 0) || (after == 0 && rest != 0)) {
    return Status::InvalidArgument(
        fmt::format("assignment: node {} of {} with {} workers from rank {} cannot be part of {} workers", node_rank,
                    nnodes, own.nproc, rank_offset, world_size));
  }
  // Every agent of a 1,024-node job builds 1,024 rows here: one allocation for
  // the table, and names short enough to need none of their own.
  std::vector<Node> nodes(static_cast<size_t>(nnodes));
  for (int i = 0; i < nnodes; ++i) {
    Node& node = nodes[static_cast<size_t>(i)];
    if (i == node_rank) {
      node = own;
      continue;
    }
    // One worker each, and the remainder on the first node of each side.
    bool first_before = i == 0, first_after = i == node_rank + 1;
    node.nproc = first_before ? rank_offset - (before - 1) : first_after ? rest - (after - 1) : 1;
    node.host = "node" + std::to_string(i);
    node.addr = node.host;
  }
  return nodes;
}

LocalShape ShapeOf(const JobLayout& layout, const WorkerSlot& slot) {
  if (const auto& v = layout.process_view) return {v->local_rank, v->local_world_size, v->node_rank, v->nnodes};
  return {slot.local_rank, layout.nodes[static_cast<size_t>(layout.node_rank)].nproc, layout.node_rank,
          static_cast<int>(layout.nodes.size())};
}

int WorldSize(const JobLayout& layout) { return RankOffset(layout, static_cast<int>(layout.nodes.size())); }

int RankOffset(const JobLayout& layout, int node_rank) {
  int offset = 0;
  for (int i = 0; i < node_rank && i < static_cast<int>(layout.nodes.size()); ++i) {
    offset += layout.nodes[static_cast<size_t>(i)].nproc;
  }
  return offset;
}

Status Validate(const JobLayout& layout) {
  if (Status s = ValidateNodes(layout); !s.ok()) return s;
  if (layout.roles.empty()) return Status::Ok();
  return ValidateRoles(layout);
}

std::vector<WorkerSlot> LocalSlots(const JobLayout& layout) {
  const Node& node = layout.nodes[static_cast<size_t>(layout.node_rank)];
  const int offset = RankOffset(layout, layout.node_rank);
  const int world = WorldSize(layout);
  std::vector<WorkerSlot> slots;
  slots.reserve(static_cast<size_t>(node.nproc));
  for (int local = 0; local < node.nproc; ++local) {
    WorkerSlot slot;
    slot.local_rank = local;
    slot.rank = offset + local;
    if (layout.roles.empty()) {
      // torchrun with a single role: the role spans the whole job.
      slot.role = layout.role;
      slot.role_rank = slot.rank;
      slot.role_world_size = world;
    } else {
      // Roles take consecutive global ranks in the order they are listed.
      int first = 0;
      for (const RoleSpec& role : layout.roles) {
        if (slot.rank < first + role.count) {
          slot.role = role.name;
          slot.role_rank = slot.rank - first;
          slot.role_world_size = role.count;
          break;
        }
        first += role.count;
      }
    }
    if (!node.task_ports.empty()) slot.port = node.task_ports[static_cast<size_t>(local)];
    slots.push_back(slot);
  }
  return slots;
}

}  // namespace dlaunch::envmap
