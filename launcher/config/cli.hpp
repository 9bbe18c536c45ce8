// The command line: torchrun's flags (both spellings), torch.distributed.launch's
// legacy switches, and dlaunch's own.
//
// Parse() only reads argv and the environment snapshot it is given; checks that
// need the system (is the log dir writable, is the port free, does the command
// exist) happen in main, at the edge.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/defaults.hpp"
#include "envmap/layout.hpp"
#include "base/status.hpp"

namespace dlaunch::launcher {

enum class NprocKind { kNumber, kAuto, kGpu, kCpu };

struct Options {
  // --nproc-per-node. Default: 1 (torchrun); `auto` in entrypoint form, where
  // it means one per GPU, else 1. Typed, `auto` is torchrun's: one per GPU, else
  // os.cpu_count() (MachineFacts::cpus).
  NprocKind nproc_kind = NprocKind::kNumber;
  int nproc = 1;
  bool nproc_given = false;

  // --nnodes N or MIN:MAX. Default: 1.
  int min_nodes = 1;
  int max_nodes = 1;
  int node_rank = 0;
  bool node_rank_given = false;
  std::string master_addr = base::kLoopbackAddress;
  std::optional<int> master_port;  // Default: a free port on a single node, else kDefaultMasterPort.
  std::string local_addr;

  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  std::string rdzv_id;  // Default: generated (TORCHELASTIC_RUN_ID).
  bool standalone = false;
  // --rdzv-conf k=v,...: is_host=0|1, join_timeout, last_call_timeout,
  // heartbeat_timeout (seconds).
  std::optional<bool> is_host;  // Default: the node whose address is the endpoint's
  std::chrono::milliseconds join_timeout{base::kDefaultJoinTimeout};
  std::chrono::milliseconds last_call_timeout{base::kDefaultLastCallTimeout};
  std::chrono::milliseconds heartbeat_timeout{base::kDefaultHeartbeatTimeout};
  std::string rdzv_token;          // --rdzv-token
  std::string rdzv_token_file;     // --rdzv-token-file
  std::vector<std::string> nodes;  // --nodes a,b,c: node rank = position
  std::string hostfile;            // --hostfile F: the same, from a file
  std::string host_list;           // -H/--host n1:8,n2:8 (mpirun's form)
  // -np N (horovodrun's and mpirun's spelling): the job's processes in all,
  // filling the node list's slots in order (a host without a count has 1), or
  // this node's workers without a list; the command then runs as given. 0: not given.
  int np = 0;
  std::string include;  // DeepSpeed's --include host1@host2:0,1
  std::string exclude;  // DeepSpeed's --exclude

  // Head-node launch (--hostfile or -H without --rdzv-endpoint): one agent per
  // node, started through ssh or pdsh.
  std::string remote = "ssh";            // --remote ssh|pdsh
  std::optional<int> ssh_port;           // --ssh-port
  std::string ssh_identity;              // --ssh-identity KEY
  std::vector<std::string> ssh_options;  // --ssh-option K=V (repeatable): ssh -o K=V
  std::vector<std::string> exports;      // -x NAME[=VALUE] (repeatable), as mpirun's
  std::string remote_dlaunch;            // --remote-dlaunch PATH (default: this binary's path)

  // per-process: the workers are the command (torchrun). per-node: the command is
  // itself a per-node launcher (torch.distributed.launch, accelerate, Lightning),
  // started once per node with NODE_RANK, NNODES, MASTER_ADDR and MASTER_PORT.
  std::string launch_mode = "per-process";

  bool explain = false;  // print what was detected and the layout; launch nothing

  int max_restarts = 0;
  std::string role = "default";
  std::chrono::milliseconds shutdown_timeout{base::kDefaultShutdownTimeout};
  // --hang-timeout: no rank wrote a line this long: take every rank's stack.
  std::chrono::milliseconds hang_timeout{base::kDefaultHangTimeout};  // 0: off
  bool hang_stop = false;                                             // --hang-action stop: then end the job, exit 124
  bool no_python_hook = false;                                        // --no-python-hook
  std::vector<int> signals_to_handle;                                 // Default: SIGTERM, SIGINT, SIGHUP, SIGQUIT

  // How the command is run.
  bool module = false;          // -m: python -m MODULE
  bool no_python = false;       // run the command as given
  bool run_path = false;        // runpy.run_path in the interpreter
  bool after_dashdash = false;  // the command came after `--`: run as given
  std::vector<std::string> command;

  // torch.distributed.launch.
  bool legacy_launch = false;
  bool use_env = false;
  bool local_rank_underscore = false;

  // Output.
  std::string log_dir;
  std::string events;           // --events FILE: one JSON object per line (launcher/core/events.hpp)
  std::string metrics_addr;     // --metrics-addr HOST:PORT; empty: DLAUNCH_METRICS_ADDR, else none
  std::string redirects = "0";  // torchrun Std: 0 none, 1 out, 2 err, 3 both, or "0:1,1:2"
  std::string tee = "0";
  std::vector<int> local_ranks_filter;    // empty: every local rank on the console
  std::optional<std::string> tag_format;  // --tag-output[=FMT]
  bool no_tag = false;

  // Dialects.
  bool env_ompi = false;
  bool env_azure = false;
  bool env_horovod = false;
  std::vector<envmap::RoleSpec> roles;

  // Placement.
  std::string bind_to = "none";  // none | core | numa
  bool pin_gpu = false;
  bool virtual_local_rank = false;  // torchrun 2.x: LOCAL_RANK=0, one GPU in CUDA_VISIBLE_DEVICES

  bool help = false;
  bool version = false;

  // Lines for stderr before the run ("--rdzv-conf: ignoring key 'x' ..."):
  // what was accepted but has no effect. main prints them, "dlaunch: " first.
  std::vector<std::string> warnings;

  // Where each flag given came from: its long name -> "--name" (typed) or
  // "PET_NAME" (torchrun's environment default). Flags not here took their default.
  std::map<std::string, std::string, std::less<>> given;
  // Every flag typed, in order: its long name and its value ("" for a switch).
  std::vector<std::pair<std::string, std::string>> typed;
};

// Options records only what was typed; these are read off it.
//
// A flag or PET_ variable fixed the layout (--nnodes, --node-rank, --master-addr,
// --master-port, --nodes, --hostfile, -H, --standalone): the surroundings
// (Slurm, mpirun, Azure ML, TF_CONFIG) are not consulted.
bool FixesLayout(const Options& o);
// The signals that stop the job: --signals-to-handle, else SIGTERM, SIGINT,
// SIGHUP and SIGQUIT (torchrun's).
std::vector<int> StopSignals(const Options& o);
// The flags, as typed, that a head passes on to every agent (ForAgents), in
// canonical spelling: "--max-restarts", "3", "--tag-output=FMT".
std::vector<std::string> AgentFlags(const Options& o);

// Parses argv (without argv[0]). `env` supplies torchrun's PET_<FLAG> defaults
// and the DLAUNCH_ROLE_ENV_<i> values of a head launch.
// Returns InvalidArgument with one line naming the flag and the value, e.g.
// "--nproc-per-node: expected a positive number, 'auto', 'gpu' or 'cpu', got '0'"
// or "unknown flag '--nproc-per-nodes' (did you mean '--nproc-per-node'?)".
// As torchrun's argparse, a long flag may be shortened to an unambiguous prefix
// of one of torchrun's flags (torchrun_flags.hpp).
Result<Options> ParseCommandLine(const std::vector<std::string>& args, const envmap::EnvMap& env);

// Whether a head-node launch passes flag `name` (long form, no dashes) on to its
// agents, or keeps it to itself. Each flag is exactly one of the two.
bool ForAgents(std::string_view name);
bool HeadOnly(std::string_view name);
// The long names of every flag.
std::vector<std::string> FlagNames();

// Parses a torchrun Std value ("3", or "0:1,1:2") into the streams for `local_rank`:
// bit 1 stdout, bit 2 stderr. Returns -1 when malformed.
int StdFor(const std::string& spec, int local_rank);

std::string UsageText();

}  // namespace dlaunch::launcher
