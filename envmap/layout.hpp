// The job layout: one description of who runs where, from which every variable
// dialect (envmap/*_env.hpp) is derived. Plain structs and pure functions: nothing
// here reads the environment, a clock, a hostname or a socket.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.hpp"

namespace dlaunch::envmap {

// Variables to set in a worker, in a fixed order (so output and tests are stable).
using EnvVars = std::vector<std::pair<std::string, std::string>>;
// The launcher's own environment, read once at the edge.
using EnvMap = std::map<std::string, std::string>;

// Returns the value of `name` in `vars`, or nullptr when it is not there.
const std::string* Find(const EnvVars& vars, const std::string& name);
// Sets `name` to `value` in `vars`, after removing any earlier entry of that
// name: each name once, and a later layer overrides an earlier one.
void Override(EnvVars& vars, const std::string& name, const std::string& value);

struct Node {
  std::string host;             // a name for people and for HOROVOD_HOSTNAME
  std::string addr;             // the address other nodes reach it at
  int nproc = 1;                // worker processes on this node
  std::vector<int> task_ports;  // one free port per local worker (TF tasks); may be empty
};

// A TensorFlow-style role: chief, worker, ps or evaluator. Roles are job-wide:
// "--roles chief:1,worker:2,ps:1" gives global rank 0 to the chief, 1-2 to the
// workers and 3 to the ps, in the order the roles are listed.
struct RoleSpec {
  std::string name;
  int count = 1;
  EnvVars env;  // extra variables for this role only (seed 000: ps gets MAGIC=newnumber)
};

// Where something else started one dlaunch per worker (mpirun -np N, srun -n N)
// and dlaunch runs that one worker: the layout then has one "node" of one worker
// per process, which gets RANK and WORLD_SIZE right, and this view supplies what
// the machine's real shape says instead: LOCAL_RANK, LOCAL_WORLD_SIZE, and the
// physical node as GROUP_RANK/NODE_RANK (of GROUP_WORLD_SIZE).
struct ProcessView {
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int nnodes = 1;
};

struct JobLayout {
  std::vector<Node> nodes;  // index is the node rank; never empty
  int node_rank = 0;        // which node this launcher is
  std::string master_addr;  // node rank 0's address
  int master_port = 0;
  std::string run_id;
  int restart_count = 0;
  int max_restarts = 0;
  std::string role = "default";             // torchrun's --role, used when `roles` is empty
  std::vector<RoleSpec> roles;              // empty: no TF roles
  bool agent_store = false;                 // TORCHELASTIC_USE_AGENT_STORE
  std::optional<ProcessView> process_view;  // set: one dlaunch per worker
};

// What one local worker is.
struct WorkerSlot {
  int local_rank = 0;
  int rank = 0;  // global rank
  std::string role = "default";
  int role_rank = 0;
  int role_world_size = 0;
  int port = 0;  // this task's own port (from Node::task_ports), 0 if none
};

int WorldSize(const JobLayout& layout);
// Global rank of local rank 0 on `node_rank`: the sum of nproc of the nodes before it.
int RankOffset(const JobLayout& layout, int node_rank);

// The node table of an agent that was sent only its own row (`own`, at
// `node_rank` of `nnodes`): the other rows are placeholders named "node<i>" whose
// worker counts add up to `rank_offset` before this node and to `world_size` in
// all, so that RANK, WORLD_SIZE and GROUP_WORLD_SIZE come out right. Fails with
// InvalidArgument when the numbers cannot describe a job (each node runs at
// least one worker).
Result<std::vector<Node>> PartialTable(int nnodes, int node_rank, const Node& own, int rank_offset, int world_size);

// What a worker is told about its machine: the layout's node, or the process
// view when one dlaunch runs one worker.
struct LocalShape {
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int nnodes = 1;
};
LocalShape ShapeOf(const JobLayout& layout, const WorkerSlot& slot);

// Checks the layout's invariants: at least one node, node_rank in range, nproc >= 1
// everywhere, task_ports empty or nproc long, role counts >= 1 summing to the world
// size, at most one chief and one evaluator, known role names (chief, worker, ps,
// evaluator). Returns InvalidArgument naming the first problem, e.g.
// "--roles: counts add up to 3 but the job has 4 processes".
Status Validate(const JobLayout& layout);

// The slots of this node's workers, local rank 0 first. The layout must be valid.
std::vector<WorkerSlot> LocalSlots(const JobLayout& layout);

}  // namespace dlaunch::envmap
