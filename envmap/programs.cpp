#include "envmap/programs.hpp"

#include <set>

#include <fmt/core.h>

namespace dlaunch::envmap {

namespace {

std::string GroupName(const ProgramGroup& g, size_t index) {
  std::string where = g.line.empty() ? fmt::format("group {}", index + 1) : g.line;
  return g.role.empty() ? where : fmt::format("{} ({})", where, g.role);
}

// Replaces %t with the rank, %o with its place in its group and %% with %, as
// srun does in a --multi-prog line; any other % stays.
std::string Expand(const std::string& arg, int rank, int offset) {
  std::string out;
  out.reserve(arg.size());
  for (size_t i = 0; i < arg.size(); ++i) {
    char next = i + 1 < arg.size() ? arg[i + 1] : '\0';
    if (arg[i] == '%' && (next == 't' || next == 'o' || next == '%')) {
      out += next == 't' ? std::to_string(rank) : next == 'o' ? std::to_string(offset) : std::string("%");
      ++i;
      continue;
    }
    out += arg[i];
  }
  return out;
}

// The table's index, or one made now when the table has none.
const RankIndex& IndexOf(const ProgramTable& table, RankIndex& made) {
  if (table.index.role_rank.size() == table.group_of.size() && table.index.group_size.size() == table.groups.size())
    return table.index;
  made = IndexRanks(table);
  return made;
}

}  // namespace

RankIndex IndexRanks(const ProgramTable& table) {
  RankIndex ix;
  const size_t n = table.group_of.size();
  ix.role_rank.resize(n);
  ix.world_rank.resize(n);
  ix.group_size.assign(table.groups.size(), 0);
  for (size_t rank = 0; rank < n; ++rank) {
    auto g = static_cast<size_t>(table.group_of[rank]);
    ix.role_rank[rank] = ix.group_size[g]++;
    // A group restarted alone is a world of its own, numbered as its group;
    // the others share one world, numbered in rank order.
    ix.world_rank[rank] = table.groups[g].restarts >= 0 ? ix.role_rank[rank] : ix.shared_world++;
  }
  return ix;
}

std::vector<int> ConsecutiveRanks(const std::vector<int>& counts) {
  std::vector<int> group_of;
  for (size_t g = 0; g < counts.size(); ++g)
    group_of.insert(group_of.end(), static_cast<size_t>(counts[g]), static_cast<int>(g));
  return group_of;
}

Status ValidatePrograms(const ProgramTable& table, int world_size) {
  const size_t n = table.groups.size();
  if (static_cast<int>(table.group_of.size()) != world_size) {
    return Status::InvalidArgument(fmt::format("the groups have {} worker processes in all but the job has {}",
                                               table.group_of.size(), world_size));
  }
  std::vector<int> first(n, -1), last(n, -1), count(n, 0);
  for (size_t rank = 0; rank < table.group_of.size(); ++rank) {
    int g = table.group_of[rank];
    if (g < 0 || static_cast<size_t>(g) >= n) return Status::InvalidArgument(fmt::format("rank {} has no group", rank));
    if (first[static_cast<size_t>(g)] < 0) first[static_cast<size_t>(g)] = static_cast<int>(rank);
    last[static_cast<size_t>(g)] = static_cast<int>(rank);
    ++count[static_cast<size_t>(g)];
  }
  std::set<std::string> roles;
  for (size_t g = 0; g < n; ++g) {
    const ProgramGroup& group = table.groups[g];
    std::string name = GroupName(group, g);
    if (group.argv.empty() || group.argv[0].empty())
      return Status::InvalidArgument(fmt::format("{}: no command", name));
    if (count[g] == 0) return Status::InvalidArgument(fmt::format("{}: runs no worker", name));
    if (group.role.empty()) return Status::InvalidArgument(fmt::format("{}: has no role name", name));
    if (!roles.insert(group.role).second)
      return Status::InvalidArgument(fmt::format(
          "{}: role '{}' is named by another group too (give each group its own --role)", name, group.role));
    // A world of its own is numbered from 0 in the order of its ranks; ranks of
    // another group in between would leave it with a hole.
    if (group.restarts >= 0 && last[g] - first[g] + 1 != count[g])
      return Status::InvalidArgument(fmt::format("{}: a role restarted on its own needs consecutive ranks", name));
  }
  return Status::Ok();
}

RankRole RoleOf(const ProgramTable& table, int rank) {
  RankIndex made;
  const RankIndex& ix = IndexOf(table, made);
  RankRole r;
  r.group = table.group_of[static_cast<size_t>(rank)];
  r.role_rank = ix.role_rank[static_cast<size_t>(rank)];
  r.role_world_size = ix.group_size[static_cast<size_t>(r.group)];
  return r;
}

std::vector<std::string> ArgvOf(const ProgramTable& table, int rank) {
  RankRole r = RoleOf(table, rank);
  const ProgramGroup& group = table.groups[static_cast<size_t>(r.group)];
  if (!group.expand) return group.argv;
  std::vector<std::string> argv;
  argv.reserve(group.argv.size());
  for (const std::string& arg : group.argv) argv.push_back(Expand(arg, rank, r.role_rank));
  return argv;
}

std::vector<WorkerSlot> ProgramSlots(const JobLayout& layout, const ProgramTable& table) {
  std::vector<WorkerSlot> slots = LocalSlots(layout);
  if (table.empty()) return slots;
  RankIndex made;
  const RankIndex& ix = IndexOf(table, made);
  for (WorkerSlot& slot : slots) {
    auto rank = static_cast<size_t>(slot.rank);
    auto g = static_cast<size_t>(table.group_of[rank]);
    slot.role = table.groups[g].role;
    slot.role_rank = ix.role_rank[rank];
    slot.role_world_size = ix.group_size[g];
  }
  return slots;
}

std::vector<int> PlacesOnNode(const std::vector<WorkerSlot>& slots, const ProgramTable& table) {
  // Slots come in rank order: each group's workers here counted as they come.
  std::vector<int> seen(table.groups.size(), 0), places;
  places.reserve(slots.size());
  for (const WorkerSlot& slot : slots)
    places.push_back(seen[static_cast<size_t>(table.group_of[static_cast<size_t>(slot.rank)])]++);
  return places;
}

bool HasOwnWorlds(const ProgramTable& table) {
  for (const ProgramGroup& g : table.groups)
    if (g.restarts >= 0) return true;
  return false;
}

WorldView WorldOf(const JobLayout& layout, const WorkerSlot& slot, const ProgramTable& table) {
  RankIndex made;
  const RankIndex& ix = IndexOf(table, made);
  const auto group_index = static_cast<size_t>(table.group_of[static_cast<size_t>(slot.rank)]);
  const ProgramGroup& group = table.groups[group_index];
  WorldView view{layout, slot};
  view.slot.role = group.role;
  view.slot.role_rank = ix.role_rank[static_cast<size_t>(slot.rank)];
  view.slot.role_world_size = ix.group_size[group_index];
  if (!HasOwnWorlds(table)) return view;
  // This rank's world: its group alone when the group restarts alone, else every
  // group that does not.
  const int world_rank = ix.world_rank[static_cast<size_t>(slot.rank)];
  const int world_size = group.restarts >= 0 ? view.slot.role_world_size : ix.shared_world;
  Node node = layout.nodes[static_cast<size_t>(layout.node_rank)];
  node.nproc = world_size;
  node.task_ports.clear();
  view.layout.nodes = {node};
  view.layout.node_rank = 0;
  view.layout.roles.clear();
  if (group.restarts >= 0) {
    view.layout.master_port = group.world_port;
    view.layout.max_restarts = group.restarts;
  }
  view.slot.rank = world_rank;
  view.slot.local_rank = world_rank;
  view.slot.port = 0;
  return view;
}

EnvVars ProgramEnv(const JobLayout& layout, const WorkerSlot& slot, const ProgramTable& table, Flavors flavors,
                   const EnvMap& inherited) {
  WorldView view = WorldOf(layout, slot, table);
  const ProgramGroup& group = table.groups[static_cast<size_t>(table.group_of[static_cast<size_t>(slot.rank)])];
  flavors.ompi = flavors.ompi || group.ompi;
  flavors.azure = flavors.azure || group.azure;
  flavors.horovod = flavors.horovod || group.horovod;
  EnvVars env = WorkerEnv(view.layout, view.slot, flavors, inherited);
  if (!flavors.per_node && !flavors.virtual_local_rank) {
    // The machine's count, as mpirun's OMPI_COMM_WORLD_LOCAL_RANK: every group on
    // the node, so LOCAL_RANK picks a GPU no other group's worker picks.
    LocalShape shape = ShapeOf(layout, slot);
    Override(env, "LOCAL_RANK", std::to_string(shape.local_rank));
    Override(env, "LOCAL_WORLD_SIZE", std::to_string(shape.local_world_size));
  }
  for (const auto& [name, value] : group.env) Override(env, name, value);
  return env;
}

}  // namespace dlaunch::envmap
