// Several programs in one job: each group (an mpirun app context between `:`s,
// a line of an srun --multi-prog file, a TF spec's replica type) runs its own
// command as a role of its own. Plain structs and pure functions, as layout.hpp.
//
// Ranks keep the job's numbering (layout.hpp); the table says which group each
// global rank belongs to. A group's ranks need not be consecutive (a multi-prog
// line "0,2 a"): its ROLE_RANK is a rank's place among them.
#pragma once

#include <string>
#include <vector>

#include "base/status.hpp"
#include "envmap/layout.hpp"
#include "envmap/worker_env.hpp"

namespace dlaunch::envmap {

struct ProgramGroup {
  std::string role;               // ROLE_NAME; unique in the job
  std::vector<std::string> argv;  // argv[0] as typed
  std::string exe;                // argv[0] resolved at the edge; empty until then
  size_t local_rank_arg_at = 0;   // as RunPlan's: where --local-rank=N goes (0: at the end)
  // srun --multi-prog: "%t" in an argument becomes the rank, "%o" its place
  // among the line's ranks (ROLE_RANK), "%%" a "%". Off for mpirun-style groups.
  bool expand = false;
  EnvVars env;  // -x NAME=VALUE of this group alone: set last, they win
  // --env of this group, added to the job's dialects.
  bool ompi = false;
  bool azure = false;
  bool horovod = false;
  // --gpus: the GPU ids this group's workers on a node take in turn (its first
  // worker on the node the first id); empty: the job's (--pin-gpu by LOCAL_RANK).
  std::vector<std::string> gpus;
  // --role-restarts ROLE=N: when one of its workers fails, only this group's
  // workers restart, at most N times. Such a group is a world of its own (RANK
  // is ROLE_RANK, WORLD_SIZE its size, MASTER_PORT world_port). -1: it shares
  // the job's world and its restart policy.
  int restarts = -1;
  int world_port = 0;  // MASTER_PORT of its own world; set at the edge when restarts >= 0
  std::string line;    // where it was written, for messages: "group 2", "FILE:3"
};

// What RoleOf and WorldOf count for every rank, in one pass over group_of.
struct RankIndex {
  std::vector<int> role_rank;   // each rank's place among its group's ranks
  std::vector<int> world_rank;  // each rank's place in its world (WorldOf)
  std::vector<int> group_size;  // each group's ranks in the job
  int shared_world = 0;         // the ranks of the groups without restarts of their own
};

struct ProgramTable {
  std::vector<ProgramGroup> groups;
  std::vector<int> group_of;  // the group of each global rank; size: the world size
  // IndexRanks(*this), once group_of and each group's restarts are final
  // (TableFor does it): RoleOf and WorldOf then answer a rank at once. Left
  // empty, each call counts over the whole world, and a node's workers
  // together cost O(workers * world).
  RankIndex index;

  bool empty() const { return groups.empty(); }
};

// The index of a table whose group_of and restarts are final. O(world).
RankIndex IndexRanks(const ProgramTable& table);

// The groups as a plan holds them, before the layout (and so the world size)
// is known: a rendezvous learns it only when the nodes have met.
struct ProgramPlan {
  // The colon syntax: each group's workers on every node, in order. A node of
  // the job runs each group's count in turn (one node: ranks in group order).
  std::vector<ProgramGroup> groups;
  std::vector<int> per_node;
  // --multi-prog FILE: its name and text, read once when the plan is made.
  std::string multi_prog_file;
  std::string multi_prog_text;
  // --role-restarts ROLE=N, applied to the group of that role.
  std::vector<std::pair<std::string, int>> restarts;
  // A head launch with hosts of each group's own: each node's count of each
  // group, in node rank order (node_counts[node][group]). Empty: every node
  // runs per_node.
  std::vector<std::vector<int>> node_counts;
  // --env tf: the groups are TensorFlow's tasks (chief, worker, ps,
  // evaluator) and every worker gets TF_CONFIG, as with --roles.
  bool tf = false;

  bool empty() const { return groups.empty() && multi_prog_file.empty(); }
};

// A rank's place in its group.
struct RankRole {
  int group = 0;
  int role_rank = 0;        // its place among the group's ranks, in rank order
  int role_world_size = 0;  // the group's ranks in the job
};

// The table of `count` groups laid out one after the other, as mpirun numbers
// app contexts: the first counts[0] ranks are group 0, and so on.
std::vector<int> ConsecutiveRanks(const std::vector<int>& counts);

// Checks that every rank of `world_size` has a group, that every group has a
// rank, a command and a role named once, and that a group with restarts holds
// consecutive ranks. Fails naming the group's line: "group 2 (rollout): ...".
Status ValidatePrograms(const ProgramTable& table, int world_size);

// `rank`'s group, role rank and role size. The table must be valid.
RankRole RoleOf(const ProgramTable& table, int rank);

// The argv `rank` runs: its group's, with %t, %o and %% expanded where the group asks.
std::vector<std::string> ArgvOf(const ProgramTable& table, int rank);

// LocalSlots(layout), each slot's role fields (role, role_rank,
// role_world_size) its group's when `table` is not empty.
std::vector<WorkerSlot> ProgramSlots(const JobLayout& layout, const ProgramTable& table);

// The place of each of `slots` among the workers of its group on this node (0
// for the group's first there): which of the group's --gpus it takes.
std::vector<int> PlacesOnNode(const std::vector<WorkerSlot>& slots, const ProgramTable& table);

// Whether any group is a world of its own (restarts >= 0).
bool HasOwnWorlds(const ProgramTable& table);

// The world `rank` is part of, for its variables: the job's when no group has
// one of its own. Otherwise a group with restarts is a world alone, and the
// groups without form one world together, numbered in rank order. Every world
// then lives on this one node (plans refuse own worlds across nodes).
struct WorldView {
  JobLayout layout;  // the world's: one node of its ranks here, its own port
  WorkerSlot slot;   // the rank in that world, its role fields from the table
};
WorldView WorldOf(const JobLayout& layout, const WorkerSlot& slot, const ProgramTable& table);

// Every variable `slot`'s worker gets when the job runs `table`'s programs:
// WorkerEnv in its world, with the group's dialects added to `flavors`, ROLE_*
// from its group, LOCAL_RANK and LOCAL_WORLD_SIZE counted over every group on
// the node, and the group's own variables last.
EnvVars ProgramEnv(const JobLayout& layout, const WorkerSlot& slot, const ProgramTable& table, Flavors flavors,
                   const EnvMap& inherited);

}  // namespace dlaunch::envmap
