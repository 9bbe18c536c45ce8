// What this dlaunch will do, decided once. Decide() turns what the user typed
// (Options), what the surroundings say (envmap::Detect, read once at the edge)
// and facts about this machine into a Plan, and records where each value came
// from for --explain. Nothing after Decide reads the command line's Options: the
// modes (launcher/modes/) take a Plan, const: one variant per mode, each holding
// what that mode's parts take and nothing else. --explain prints the Plan a run
// would execute, so every check a run makes on its flags is made here.
//
// Pure: no fork, no sockets. It reads files only where the user named one (the
// hostfile, the token file).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "envmap/detect.hpp"
#include "envmap/layout.hpp"
#include "envmap/programs.hpp"
#include "base/status.hpp"
#include "envmap/worker_env.hpp"
#include "launcher/config/health_flags.hpp"
#include "launcher/config/hostfile.hpp"
#include "launcher/config/recovery_flags.hpp"
#include "launcher/config/straggler_flags.hpp"
#include "rendezvous/connection.hpp"
#include "rendezvous/coordinator.hpp"

namespace dlaunch::launcher {

struct Options;

// What Decide needs to know about this machine; main reads it once.
struct MachineFacts {
  std::string host_name;
  int cpus = 1;                   // os.cpu_count(): the online CPUs (launcher/core/system.hpp PythonCpuCount)
  std::vector<std::string> gpus;  // the visible GPU ids (CUDA_VISIBLE_DEVICES, else every GPU)
  std::string fresh_id;           // a random run id, used when none is given
};

enum class Mode {
  kSingleNode,  // one node, the layout from the flags
  kStatic,      // torch.distributed.launch's static multi-node form: every node is told the layout
  kRendezvous,  // a node agent of the TCP rendezvous (hosting the coordinator when it is ours)
  kHead,        // the head of a job over ssh/pdsh: one agent per listed node
};

// "single-node", "static", "rendezvous", "head" (--events' job_started).
const char* ModeName(Mode mode);

// One line of --explain's provenance: "nodes: 4 (SLURM_NNODES)".
struct Origin {
  std::string what;
  std::string value;
  std::string from;
};

// The plans below hold no defaults of their own: Decide fills every field, from
// Options, whose initialisers are the one home of each flag's default
// (launcher/config/cli.hpp).
//
// This node's workers: everything the runner needs but the run directory and
// the resolved executable, which main finds at the edge.
struct WorkerPlan {
  int nproc = 1;
  std::vector<std::string> argv;  // argv[0] as the user would type it
  // --legacy-launch: where --local-rank=N goes in argv: right after the script,
  // as torch.distributed.launch puts it; at the end after `--`.
  size_t local_rank_arg_at = 0;
  // The job's id as the workers see it (TORCHELASTIC_RUN_ID): --rdzv-id or the
  // surroundings', else a fresh one; in a rendezvous, the coordinator's ("none").
  std::string run_id;
  std::string log_name;  // the run's directory under --log-dir: --rdzv-id, else a fresh id
  int max_restarts = 0;
  RecoveryFlags recovery;    // --max-no-progress-restarts, --restart-backoff
  StragglerFlags straggler;  // --straggler-*: naming the rank the others wait for
  std::string role;
  std::vector<envmap::RoleSpec> roles;
  // Several programs (groups.hpp WithPrograms): empty, or the
  // groups and their commands; argv is then the first group's, for --explain.
  envmap::ProgramPlan programs;
  std::optional<envmap::ProcessView> process_view;
  envmap::Flavors flavors;                           // azure_hostfile and error_file are filled in at the edge
  envmap::EnvMap inherited;                          // the launcher's environment, less what is dlaunch's alone
  std::string log_dir;                               // --log-dir; empty: a run directory of its own
  std::string events;                                // --events FILE; empty: none
  std::optional<rendezvous::HostPort> metrics_addr;  // --metrics-addr (DLAUNCH_METRICS_ADDR); none: no metrics
  bool write_logs = false;
  std::vector<int> redirected;     // per local rank (torchrun's Std)
  std::vector<int> console_ranks;  // empty: every local rank
  std::optional<std::string> tag_format;
  std::string bind_to;
  std::vector<std::string> gpus;
  bool pin_gpu = false;
  std::chrono::milliseconds shutdown_timeout{};
  std::vector<int> stop_signals;
  std::chrono::milliseconds hang_timeout{};  // 0: no hang watch
  bool hang_stop = false;
  bool python_hook = false;
};

// The static form's layout (Mode::kSingleNode and kStatic).
struct StaticPlan {
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;
  std::optional<int> master_port;  // nullopt: a free port on one node, else 29500
  std::string local_addr;
  bool hosts_master = true;
  // -H, --hostfile or --nodes beside --node-rank: the nodes' addresses in node
  // rank order (--env horovod's store serves only them); empty: unknown.
  std::vector<std::string> node_list;
};

// A node agent of the TCP rendezvous (Mode::kRendezvous).
struct RendezvousPlan {
  std::optional<rendezvous::HostPort> endpoint;  // nullopt while from_mpi is pending
  bool from_mpi = false;                         // the endpoint is rank 0's, learnt through MPI (main)
  std::optional<bool> is_host;                   // nullopt: host when the endpoint is an address of ours
  std::string token;
  std::vector<std::string> node_list;  // fixes node ranks by position; may be empty
  int min_nodes = 1;
  int max_nodes = 1;
  int requested_node_rank = -1;
  std::string local_addr;
  std::string host_name;
  std::optional<int> master_port;
  std::chrono::milliseconds join_timeout{};
  std::chrono::milliseconds heartbeat_timeout{};
  HealthCheckPlan health;  // --health-check: this node's check before it joins
  // The hosted coordinator's options: all but the endpoint, which the host adds.
  rendezvous::CoordinatorOptions coordinator;
};

// A head launch sends each --role-env ROLE:NAME=VALUE to its agents as the
// variable DLAUNCH_ROLE_ENV_<i> (i = 0, 1, ...) over ssh's stdin, not on the
// command line where every local user's `ps` would show the value. The agent
// reads them as if they were --role-env flags after its own, and its workers
// never inherit them.
inline constexpr std::string_view kRoleEnvVarPrefix = "DLAUNCH_ROLE_ENV_";

// The head of a job over ssh/pdsh (Mode::kHead).
struct HeadPlan {
  std::vector<HostEntry> hosts;
  std::vector<std::string> workers;  // per host, the agent's --nproc-per-node: "8", or "auto" for it to resolve
  std::vector<std::pair<std::string, std::string>> exports;  // -x, resolved here
  std::vector<std::string> exports_unset;                    // -x NAME not set here
  std::string remote;                                        // ssh or pdsh
  std::optional<int> ssh_port;
  std::string ssh_identity;
  std::vector<std::string> ssh_options;
  std::string remote_dlaunch;
  std::string local_addr;
  std::string run_id;  // empty: the head makes one
  std::string token;   // empty: the head makes a fresh one for this job
  // The agents' flags after the rendezvous and node ones: the tag, then what the
  // user gave that agents need (ForAgents), as typed.
  std::vector<std::string> agent_flags;
  std::vector<std::string> command;  // "--" and the command, or the torchrun form as typed
  std::vector<int> stop_signals;
  std::chrono::milliseconds shutdown_timeout{};
  std::string events;                          // --events FILE: the head's own events (job_started, job_finished)
  rendezvous::CoordinatorOptions coordinator;  // all but the run id and the token
  StragglerFlags straggler;                    // the head compares every node's ranks (its agents get the flags too)
  // Several programs: the groups for every agent (programs_codec.hpp), sent
  // as DLAUNCH_PROGRAMS with the -x values; empty: one program.
  std::string programs;
};

// Mode::kSingleNode and kStatic: this node's workers, the layout from the flags.
struct NodePlan {
  WorkerPlan workers;
  StaticPlan layout;
};

// Mode::kRendezvous: this node's workers, the layout from the coordinator.
struct AgentPlan {
  WorkerPlan workers;
  RendezvousPlan rendezvous;
};

struct Plan {
  bool explain = false;
  envmap::Detected detected;  // what the surroundings said, used or not
  bool layout_from_flags = false;
  std::vector<Origin> origins;
  std::variant<NodePlan, AgentPlan, HeadPlan> run;

  Mode mode() const;
  // This node's workers; null for a head, which runs none.
  const WorkerPlan* workers() const;
};

// `detected` is envmap::Detect's answer; its error matters only when no flag
// fixed the layout. Fails with one line naming the flag, file or variable.
Result<Plan> Decide(const Options& flags, const Result<envmap::Detected>& detected, const MachineFacts& facts,
                    const envmap::EnvMap& env);

// The job's nodes from --hostfile, -H or --nodes, filtered by --include or
// --exclude; empty when none is given. Fails naming the file and line, or the flag.
Result<std::vector<HostEntry>> NodeList(const Options& flags);

// The head's plan for `hosts` (Decide reads them from the flags' node list).
Result<HeadPlan> HeadPlanFor(const Options& flags, const envmap::EnvMap& env, std::vector<HostEntry> hosts);

// After the Open MPI bootstrap: the same agent, at rank 0's endpoint, hosted by
// rank 0. Fails naming the helper's answer when it is no HOST:PORT.
Result<AgentPlan> WithMpiEndpoint(const AgentPlan& plan, const std::string& endpoint);

// The same plan, its workers inheriting NAME=VALUE unless they already do
// (`dlaunch job`'s hostfile, written just before the run).
Plan WithInherited(const Plan& plan, const std::string& name, const std::string& value);

// The --explain report of a plan (not a head's): the source, its evidence, the
// mode, the layout, the command, and where each value came from.
std::string Explain(const Plan& plan);

}  // namespace dlaunch::launcher
