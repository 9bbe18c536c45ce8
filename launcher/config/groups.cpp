#include "launcher/config/groups.hpp"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/core/text.hpp"
#include "launcher/config/multi_prog.hpp"
#include "launcher/config/programs_codec.hpp"

namespace dlaunch::launcher {

namespace {

Status ApplyRestarts(const std::vector<std::pair<std::string, int>>& restarts, envmap::ProgramTable& table) {
  for (const auto& [role, n] : restarts) {
    bool found = false;
    for (envmap::ProgramGroup& g : table.groups) {
      if (g.role != role) continue;
      g.restarts = n;
      found = true;
    }
    if (!found) {
      std::vector<std::string> roles;
      for (const envmap::ProgramGroup& g : table.groups) roles.push_back(g.role);
      return Status::InvalidArgument(
          fmt::format("--role-restarts: no group has role '{}' (the roles are {})", role, fmt::join(roles, ", ")));
    }
  }
  return Status::Ok();
}

// The group of each rank when node n runs rows[n][g] workers of each group g
// in turn, node by node.
std::vector<int> RanksNodeByNode(const std::vector<std::vector<int>>& rows) {
  std::vector<int> group_of;
  for (const std::vector<int>& row : rows) {
    std::vector<int> node = envmap::ConsecutiveRanks(row);
    group_of.insert(group_of.end(), node.begin(), node.end());
  }
  return group_of;
}

// --env tf: the groups as TensorFlow's tasks, for TF_CONFIG (the layout's
// roles, envmap/tf_config.cpp): each group's count in the job, its ranks
// together, and what --roles would check (task names, one chief, ps with
// workers). `nnodes`: the job's nodes when every node runs per_node.
Result<std::vector<envmap::RoleSpec>> TfRolesOf(const envmap::ProgramPlan& programs, int nnodes) {
  if (!programs.restarts.empty())
    return Status::InvalidArgument("--env tf: not with --role-restarts (TF_CONFIG names every task of one cluster)");
  const std::vector<int> group_of = RanksNodeByNode(
      programs.node_counts.empty() ? std::vector<std::vector<int>>(static_cast<size_t>(nnodes), programs.per_node)
                                   : programs.node_counts);
  if (!std::is_sorted(group_of.begin(), group_of.end()))
    return Status::InvalidArgument(
        "--env tf: each group's tasks must take consecutive ranks; give each group hosts of its own, in group order");
  std::vector<envmap::RoleSpec> roles;
  for (size_t g = 0; g < programs.groups.size(); ++g)
    roles.push_back(
        envmap::RoleSpec{programs.groups[g].role,
                         static_cast<int>(std::count(group_of.begin(), group_of.end(), static_cast<int>(g))),
                         {}});
  envmap::JobLayout check;
  check.nodes = {envmap::Node{"", "", static_cast<int>(group_of.size()), std::vector<int>(group_of.size(), 1)}};
  check.roles = roles;
  if (Status s = envmap::Validate(check); !s.ok()) {
    std::string message = s.message();
    if (message.starts_with("--roles: ")) message = "--env tf: the groups' roles: " + message.substr(9);
    return Status::InvalidArgument(message);
  }
  return roles;
}

WorkerPlan* WorkersOf(Plan& plan) {
  if (auto* node = std::get_if<NodePlan>(&plan.run)) return &node->workers;
  if (auto* agent = std::get_if<AgentPlan>(&plan.run)) return &agent->workers;
  return nullptr;
}

}  // namespace

Result<Plan> WithPrograms(Plan plan, const envmap::ProgramPlan& programs) {
  if (programs.empty()) return plan;
  if (auto* head = std::get_if<HeadPlan>(&plan.run)) {
    if (!programs.restarts.empty())
      return Status::InvalidArgument(
          "--role-restarts: a role restarted alone runs on one node (its workers' new world cannot span nodes yet)");
    // As srun's steps do, each agent reads the file at the same path on its node
    // (--multi-prog goes to it as typed); the head has checked it can be read.
    if (!programs.multi_prog_file.empty()) return plan;
    if (programs.tf) {
      Result<std::vector<envmap::RoleSpec>> roles = TfRolesOf(programs, static_cast<int>(head->hosts.size()));
      if (!roles.ok()) return roles.status();
    }
    head->programs = EncodePrograms(programs);
    // What every agent would refuse (too many groups, too large a document),
    // the head refuses now, in one line, before it starts any.
    if (Result<envmap::ProgramPlan> read = DecodePrograms(head->programs); !read.ok())
      return Status::InvalidArgument(
          fmt::format("several groups: the agents could not take them: {}", read.status().message()));
    return plan;
  }
  WorkerPlan* w = WorkersOf(plan);
  const char* what = programs.multi_prog_file.empty() ? "several groups" : "--multi-prog";
  if (w->flavors.per_node)
    return Status::InvalidArgument(
        fmt::format("--launch-mode per-node: not with {} (each worker runs its own program)", what));
  if (!w->roles.empty())
    return Status::InvalidArgument(fmt::format("--roles: not with {}; give each group its --role", what));
  if (w->process_view && programs.multi_prog_file.empty())
    return Status::InvalidArgument(
        "several groups: need one dlaunch a node, not one a worker (srun --ntasks-per-node=1, mpirun --npernode 1)");
  bool own_worlds = !programs.restarts.empty();
  bool one_node =
      std::holds_alternative<NodePlan>(plan.run) && std::get<NodePlan>(plan.run).layout.nnodes == 1 && !w->process_view;
  if (own_worlds && !one_node)
    return Status::InvalidArgument(
        "--role-restarts: a role restarted alone runs on one node (its workers' new world cannot span nodes yet)");
  if (programs.tf) {
    const auto* node = std::get_if<NodePlan>(&plan.run);
    Result<std::vector<envmap::RoleSpec>> roles = TfRolesOf(programs, node != nullptr ? node->layout.nnodes : 1);
    if (!roles.ok()) return roles.status();
    if (std::holds_alternative<AgentPlan>(plan.run) && programs.node_counts.empty() && programs.groups.size() > 1)
      return Status::InvalidArgument(
          "--env tf: across nodes that meet at a rendezvous, each group's tasks need hosts of their own (start the "
          "job from a head with -H per group)");
    w->roles = std::move(*roles);  // TF_CONFIG and each task's port, as --roles gives them
  }
  // An agent of a head launch knows its row of the head's counts before it
  // joins: a row that disagrees is refused now, not once the others have met
  // it and started their workers.
  if (const auto* agent = std::get_if<AgentPlan>(&plan.run); agent != nullptr && !programs.node_counts.empty()) {
    const RendezvousPlan& r = agent->rendezvous;
    const auto nodes = static_cast<int>(programs.node_counts.size());
    if (nodes != r.min_nodes || nodes != r.max_nodes)
      return Status::InvalidArgument(fmt::format("the groups name {} nodes, but the job has {}", nodes,
                                                 r.min_nodes == r.max_nodes
                                                     ? fmt::format("{}", r.max_nodes)
                                                     : fmt::format("{}:{}", r.min_nodes, r.max_nodes)));
    if (r.requested_node_rank >= 0 && r.requested_node_rank < nodes) {
      std::int64_t own = 0;
      for (int n : programs.node_counts[static_cast<size_t>(r.requested_node_rank)]) own += n;
      if (own != w->nproc)
        return Status::InvalidArgument(
            fmt::format("node {} runs {} workers, but its groups make {}", r.requested_node_rank, w->nproc, own));
    }
  }
  w->programs = programs;
  if (!programs.groups.empty()) {
    w->argv = programs.groups[0].argv;
    w->local_rank_arg_at = programs.groups[0].local_rank_arg_at;
  }
  // Checked now, with the node's count, so that --explain refuses what a run would.
  if (const auto* node = std::get_if<NodePlan>(&plan.run); node != nullptr && !w->process_view) {
    envmap::JobLayout layout;
    layout.nodes.assign(static_cast<size_t>(node->layout.nnodes), envmap::Node{"", "", w->nproc, {}});
    Result<envmap::ProgramTable> table = TableFor(programs, layout);
    if (!table.ok()) return table.status();
    if (programs.groups.empty() && !table->groups.empty()) {
      w->argv = table->groups[0].argv;
      w->local_rank_arg_at = w->argv.size();
    }
  }
  return plan;
}

Result<envmap::ProgramTable> TableFor(const envmap::ProgramPlan& programs, const envmap::JobLayout& layout) {
  envmap::ProgramTable table;
  const int world = envmap::WorldSize(layout);
  if (!programs.multi_prog_file.empty()) {
    Result<envmap::ProgramTable> parsed = ParseMultiProg(programs.multi_prog_text, programs.multi_prog_file, world);
    if (!parsed.ok()) return parsed.status();
    table = std::move(*parsed);
  } else if (!programs.node_counts.empty()) {
    // A head launch: each node's counts as the head placed them.
    table.groups = programs.groups;
    const auto& counts = programs.node_counts;
    int own = 0;
    if (counts.size() != layout.nodes.size())
      return Status::InvalidArgument(
          fmt::format("the groups name {} nodes, but the job has {}", counts.size(), layout.nodes.size()));
    for (int n : counts[static_cast<size_t>(layout.node_rank)]) own += n;
    if (own != layout.nodes[static_cast<size_t>(layout.node_rank)].nproc)
      return Status::InvalidArgument(fmt::format("node {} runs {} workers, but its groups make {}", layout.node_rank,
                                                 layout.nodes[static_cast<size_t>(layout.node_rank)].nproc, own));
    // Counted before the table is made: rows from a head that disagree with
    // this job could ask for billions of ranks.
    std::int64_t all = 0;
    for (const std::vector<int>& node : counts)
      for (int n : node) all += n;
    if (all != world)
      return Status::InvalidArgument(
          fmt::format("the groups have {} worker processes in all but the job has {}", all, world));
    table.group_of = RanksNodeByNode(counts);
  } else {
    table.groups = programs.groups;
    int per_node = 0;
    for (int n : programs.per_node) per_node += n;
    // Every node runs each group's count in turn, so a rank's group follows
    // from its place on its node; this node's row is the one a node agent
    // knows for sure (the others may be placeholders: envmap::PartialTable).
    const int own = layout.nodes[static_cast<size_t>(layout.node_rank)].nproc;
    if (own != per_node || per_node == 0 || world % per_node != 0)
      return Status::InvalidArgument(fmt::format(
          "the groups make {} workers a node, but node {} runs {} of {} in all; every node runs each group's count",
          per_node, layout.node_rank, own, world));
    std::vector<int> pattern = envmap::ConsecutiveRanks(programs.per_node);
    table.group_of.reserve(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) table.group_of.push_back(pattern[static_cast<size_t>(r % per_node)]);
  }
  if (Status s = ApplyRestarts(programs.restarts, table); !s.ok()) return s;
  if (Status s = envmap::ValidatePrograms(table, world); !s.ok()) return s;
  table.index = envmap::IndexRanks(table);
  return table;
}

std::string ExplainPrograms(const envmap::ProgramTable& table) {
  // A --multi-prog file's lines (the groups that expand %t) give each rank its
  // program wherever the line is; the colon syntax numbers the groups in turn.
  bool from_file = !table.groups.empty() && table.groups[0].expand;
  std::string out = fmt::format("groups: {} programs, {}\n", table.groups.size(),
                                from_file ? "each rank runs the line of the --multi-prog file that names it"
                                          : "ranks numbered in group order on each node");
  // Each group's ranks in one pass: a file of a line a rank has as many groups as ranks.
  std::vector<std::vector<int>> ranks_of(table.groups.size());
  for (size_t r = 0; r < table.group_of.size(); ++r)
    ranks_of[static_cast<size_t>(table.group_of[r])].push_back(static_cast<int>(r));
  for (size_t g = 0; g < table.groups.size(); ++g) {
    const envmap::ProgramGroup& group = table.groups[g];
    const std::vector<int>& ranks = ranks_of[g];
    // A multi-prog line as written: its "%%" is one '%' there.
    std::vector<std::string> argv = group.argv;
    for (std::string& arg : argv) {
      for (size_t at = 0; group.expand && (at = arg.find("%%", at)) != std::string::npos; ++at) arg.erase(at, 1);
    }
    out += fmt::format("  {} {}: ranks {} ({}): {}\n", group.line, group.role, RankRanges(ranks), ranks.size(),
                       fmt::join(argv, " "));
    if (!group.env.empty()) {
      std::vector<std::string> names;
      for (const auto& [name, value] : group.env) names.push_back(name);
      out += fmt::format("    its own variables: {}\n", fmt::join(names, ", "));
    }
    if (!group.gpus.empty())
      out += fmt::format("    GPUs: {} (--gpus), one a worker in turn\n", fmt::join(group.gpus, ","));
    if (group.restarts >= 0)
      out += fmt::format(
          "    restarted alone, at most {} times (--role-restarts): a world of its own, RANK = ROLE_RANK, "
          "WORLD_SIZE {}, its own MASTER_PORT; the other roles keep running\n",
          group.restarts, ranks.size());
  }
  return out;
}

}  // namespace dlaunch::launcher
