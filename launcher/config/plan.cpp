#include "launcher/config/plan.hpp"

#include <csignal>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/config/cli.hpp"
#include "launcher/config/command.hpp"
#include "launcher/config/coordinator_options.hpp"
#include "launcher/config/surroundings.hpp"
#include "launcher/core/output.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/coordinator.hpp"

namespace dlaunch::launcher {

namespace {

using envmap::Source;

// torch.distributed.launch's default port for static multi-node jobs.
// What a head-node launch tags each line with, unless told otherwise.
constexpr const char* kHeadTag = "[{node_rank},{rank}]: ";

bool IsHeadLaunch(const Options& o) {
  return (!o.hostfile.empty() || !o.host_list.empty() || !o.nodes.empty()) && o.rdzv_endpoint.empty();
}

bool UsesRendezvous(const Options& o) { return !o.rdzv_endpoint.empty() && !o.standalone; }

}  // namespace

Result<std::vector<HostEntry>> NodeList(const Options& o) {
  Result<std::vector<HostEntry>> hosts = std::vector<HostEntry>{};
  if (!o.hostfile.empty()) {
    Result<std::string> text = ReadHostfile(o.hostfile);
    if (!text.ok()) return text.status();
    hosts = ParseHostfile(*text, o.hostfile);
  } else if (!o.host_list.empty()) {
    hosts = ParseHostList(o.host_list, "-H");
  } else {
    for (const std::string& n : o.nodes) hosts->push_back(HostEntry{n, std::nullopt, {}});
  }
  if (!hosts.ok()) return hosts;
  return FilterHosts(std::move(*hosts), o.include, o.exclude);
}

namespace {

Result<int> ResolveNproc(const Options& o, const MachineFacts& facts) {
  int gpus = static_cast<int>(facts.gpus.size());
  switch (o.nproc_kind) {
    case NprocKind::kNumber: return o.nproc;
    case NprocKind::kCpu: return facts.cpus;
    case NprocKind::kAuto: return gpus == 0 ? 1 : gpus;
    case NprocKind::kGpu:
      if (gpus == 0) return Status::InvalidArgument("--nproc-per-node: 'gpu' given but no GPU is visible");
      return gpus;
  }
  return 1;
}

// Where flag `name`'s value came from: "--name", "PET_NAME", or `otherwise`.
std::string From(const Options& o, std::string_view name, std::string otherwise = "default") {
  auto it = o.given.find(name);
  return it != o.given.end() ? it->second : otherwise;
}

std::vector<int> StopSignals(const Options& o) {
  return o.signals_to_handle.empty() ? std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT} : o.signals_to_handle;
}

// The agent's --nproc-per-node for host `e`: a number the head knows, or the
// word for the node to resolve itself.
std::string WorkersArg(const HostEntry& e, const Options& o) {
  if (o.nproc_kind == NprocKind::kNumber || !e.only_slots.empty() || (!o.nproc_given && e.slots))
    return fmt::format("{}", WorkersOn(e, o.nproc_given, o.nproc));
  return o.nproc_kind == NprocKind::kAuto ? "auto" : o.nproc_kind == NprocKind::kGpu ? "gpu" : "cpu";
}

Status DecideHead(const Options& o, const envmap::EnvMap& env, Plan& plan) {
  Result<std::vector<HostEntry>> hosts = NodeList(o);
  if (!hosts.ok()) return hosts.status();
  Result<HeadPlan> head = HeadPlanFor(o, env, std::move(*hosts));
  if (!head.ok()) return head.status();
  plan.head = std::move(*head);
  plan.origins.push_back({"nodes", fmt::format("{}", plan.head.hosts.size()),
                          !o.hostfile.empty() ? "--hostfile" : !o.host_list.empty() ? "-H" : "--nodes"});
  plan.origins.push_back({"workers per node", fmt::format("{}", fmt::join(plan.head.workers, ",")),
                          From(o, "nproc-per-node", "the node list's slots, else each node's own")});
  return Status::Ok();
}

// The layout values, where the surroundings set them or a flag did.
void RecordOrigins(const Options& typed, const Options& o, const Surroundings& s, Plan& plan) {
  std::string env_source = s.applied ? std::string(envmap::SourceName(s.detected.source)) : "";
  auto from = [&](std::string_view flag, bool surroundings_set_it) -> std::string {
    if (typed.given.contains(flag)) return From(typed, flag);
    return surroundings_set_it ? env_source : std::string("default");
  };
  const WorkerPlan& w = plan.workers;
  plan.origins.push_back({"workers per node", fmt::format("{}", w.nproc),
                          o.launch_mode == "per-node" ? "--launch-mode per-node"
                          : typed.nproc_given         ? From(typed, "nproc-per-node")
                          : o.nproc_kind == NprocKind::kAuto
                              ? (s.applied && s.detected.has_process_view ? env_source : "the visible GPUs (auto)")
                              : "default"});
  plan.origins.push_back({"nodes", o.min_nodes == o.max_nodes ? fmt::format("{}", o.max_nodes)
                                                              : fmt::format("{}:{}", o.min_nodes, o.max_nodes),
                          from("nnodes", s.applied)});
  if (o.node_rank_given) plan.origins.push_back({"node rank", fmt::format("{}", o.node_rank), from("node-rank", s.applied)});
  if (plan.mode == Mode::kRendezvous) {
    plan.origins.push_back({"rendezvous endpoint", plan.rendezvous.from_mpi ? "(rank 0's)" : plan.rendezvous.endpoint,
                            plan.rendezvous.from_mpi ? "an Open MPI bootstrap"
                                                     : from("rdzv-endpoint", s.applied && !typed.given.contains("rdzv-endpoint"))});
    plan.origins.push_back({"run id", plan.rendezvous.coordinator.run_id,
                            from("rdzv-id", s.applied && !s.detected.run_id.empty())});
  } else if (plan.mode == Mode::kStatic) {
    plan.origins.push_back({"master",
                            fmt::format("{}:{}", o.master_addr, o.master_port.value_or(rendezvous::kDefaultMasterPort)),
                            from("master-addr", s.applied && !s.detected.master_addr.empty())});
  }
  plan.origins.push_back({"command", fmt::format("{}", fmt::join(w.argv, " ")),
                          typed.after_dashdash || typed.no_python ? "as given"
                          : typed.module                          ? "-m: the module in python3 -u"
                                                                  : "a script: python3 -u prepended, as torchrun"});
}

}  // namespace

Result<HeadPlan> HeadPlanFor(const Options& o, const envmap::EnvMap& env, std::vector<HostEntry> hosts) {
  HeadPlan h;
  int n = static_cast<int>(hosts.size());
  if (o.max_nodes > 1 && o.max_nodes != n)
    return Status::InvalidArgument(fmt::format("--nnodes: {} given, but the node list has {} host(s)", o.max_nodes, n));
  for (const HostEntry& e : hosts) h.workers.push_back(WorkersArg(e, o));
  h.hosts = std::move(hosts);
  for (const std::string& x : o.exports) {
    size_t eq = x.find('=');
    if (eq != std::string::npos) {
      h.exports.emplace_back(x.substr(0, eq), x.substr(eq + 1));
    } else if (auto it = env.find(x); it != env.end()) {
      h.exports.emplace_back(x, it->second);
    } else {
      h.exports_unset.push_back(x);
    }
  }
  h.remote = o.remote;
  h.ssh_port = o.ssh_port;
  h.ssh_identity = o.ssh_identity;
  h.ssh_options = o.ssh_options;
  h.remote_dlaunch = o.remote_dlaunch;
  h.local_addr = o.local_addr;
  h.run_id = o.rdzv_id;
  Result<std::string> token = ResolveToken(o, env);
  if (!token.ok()) return token.status();
  h.token = *token;
  if (o.tag_format) h.agent_flags.push_back("--tag-output=" + *o.tag_format);
  else if (o.no_tag) h.agent_flags.push_back("--no-tag");
  else h.agent_flags.push_back(std::string("--tag-output=") + kHeadTag);
  h.agent_flags.insert(h.agent_flags.end(), o.agent_args.begin(), o.agent_args.end());
  if (o.after_dashdash) h.command.push_back("--");
  h.command.insert(h.command.end(), o.command.begin(), o.command.end());
  h.stop_signals = StopSignals(o);
  h.shutdown_timeout = o.shutdown_timeout;
  h.events = o.events;
  h.coordinator = CoordinatorOptionsFor(o, "", n, n, o.max_restarts, "");
  return h;
}

Result<Plan> Decide(const Options& typed, const Result<envmap::Detected>& detected, const MachineFacts& facts,
                    const envmap::EnvMap& env) {
  Plan plan;
  plan.explain = typed.explain;
  plan.layout_from_flags = typed.layout_given;
  if (detected.ok()) plan.detected = *detected;

  if (IsHeadLaunch(typed)) {
    plan.mode = Mode::kHead;
    if (Status s = DecideHead(typed, env, plan); !s.ok()) return s;
    return plan;
  }

  // How many workers, and as what.
  Options o = typed;  // the surroundings fold into a copy
  Result<int> nproc = ResolveNproc(o, facts);
  if (!nproc.ok()) return nproc.status();
  int n = *nproc;
  bool per_node = o.launch_mode == "per-node";
  if (per_node) {
    if (!o.roles.empty()) return Status::InvalidArgument("--launch-mode per-node: cannot be combined with --roles");
    n = 1;  // the command is itself a launcher and starts this node's workers
  }

  // Where it runs: Slurm, mpirun, Azure ML, TF_CONFIG, unless flags fixed the layout.
  if (!detected.ok() && !o.layout_given) return detected.status();
  // Several tasks on this machine (mpirun -np 8, srun --ntasks-per-node=8): each
  // is one worker unless --nproc-per-node says otherwise, rather than one per
  // visible GPU each.
  if (detected.ok() && !o.layout_given && !o.nproc_given && detected->has_process_view && detected->local_size > 1)
    n = 1;
  Result<Surroundings> surroundings = ApplySurroundings(plan.detected, n, o);
  if (!surroundings.ok()) return surroundings.status();

  plan.mode = UsesRendezvous(o) || surroundings->needs_mpi_bootstrap ? Mode::kRendezvous
              : o.max_nodes > 1                                     ? Mode::kStatic
                                                                    : Mode::kSingleNode;
  WorkerPlan& w = plan.workers;
  w.nproc = n;
  w.process_view = o.process_view;
  w.flavors.per_node = per_node;
  if (!o.command.empty()) w.argv = WorkerArgv(o, env);
  w.local_rank_arg_at = o.after_dashdash || o.no_python ? w.argv.size() : w.argv.size() - o.command.size() + 1;

  StaticPlan& layout = plan.layout;
  layout.nnodes = o.max_nodes;
  layout.node_rank = o.node_rank;
  layout.master_addr = o.master_addr;
  layout.master_port = o.master_port;
  layout.local_addr = o.local_addr;
  layout.hosts_master = o.node_rank == 0;

  RendezvousPlan& r = plan.rendezvous;
  r.endpoint = o.rdzv_endpoint;
  r.from_mpi = surroundings->needs_mpi_bootstrap;
  r.is_host = o.is_host;
  r.min_nodes = o.min_nodes;
  r.max_nodes = o.max_nodes;
  r.requested_node_rank = o.node_rank_given ? o.node_rank : -1;
  r.local_addr = o.local_addr;
  r.host_name = facts.host_name;
  r.master_port = o.master_port;
  r.join_timeout = o.join_timeout;
  r.heartbeat_timeout = o.heartbeat_timeout;
  r.coordinator.run_id = o.rdzv_id.empty() ? "none" : o.rdzv_id;  // torchrun's default id

  // TF roles: the tasks take global ranks in the order the roles are listed, and
  // nodes take ranks in node-rank order, so each node runs its share (the
  // command line checked that the shares are whole).
  if (!o.roles.empty()) {
    int total = 0;
    for (const envmap::RoleSpec& role : o.roles) total += role.count;
    n = o.nproc_given && o.nproc_kind == NprocKind::kNumber ? o.nproc : total / o.max_nodes;
  }
  for (int local_rank : o.local_ranks_filter)
    if (local_rank >= n)
      return Status::InvalidArgument(
          fmt::format("--local-ranks-filter: local rank {} is outside this node (0-{})", local_rank, n - 1));
  w.nproc = n;

  w.run_id = o.rdzv_id.empty() ? facts.fresh_id : o.rdzv_id;
  w.max_restarts = o.max_restarts;
  w.role = o.role;
  w.roles = o.roles;
  w.log_dir = o.log_dir;
  w.events = o.events;
  w.write_logs = !o.log_dir.empty() || o.redirects != "0" || o.tee != "0";
  w.flavors.ompi = o.env_ompi;
  w.flavors.azure = o.env_azure;
  w.flavors.horovod = o.env_horovod;
  if (o.legacy_launch && !o.use_env)
    w.flavors.local_rank_arg = o.local_rank_underscore ? envmap::LocalRankArg::kUnderscore : envmap::LocalRankArg::kDash;
  // mpirun's per-process variables describe dlaunch, not its workers: a worker's
  // own MPI_Init must not take dlaunch's identity (--env ompi sets the workers' own).
  // The rendezvous secret is dlaunch's alone, too, and so is Slurm's task view
  // when this task runs several workers, or a per-node launcher that must not
  // take the task's rank for its own (Lightning reads SLURM_PROCID).
  bool hide_slurm_task = surroundings->applied && surroundings->detected.source == Source::kSlurm &&
                         (!o.process_view || per_node);
  // One worker per mpirun rank: that worker *is* the rank, so its
  // OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK and _LOCAL_SIZE are its own and
  // stay (the seeds' aml_mpienv.py and DeepSpeed's Azure ML patch read them);
  // the PMIx variables still go, so its own MPI_Init starts afresh.
  bool own_mpi_rank = surroundings->applied && surroundings->detected.source == Source::kOpenMpi &&
                      o.process_view.has_value() && !per_node && n == 1;
  auto own_rank_variable = [&](const std::string& name) {
    return own_mpi_rank && (name == "OMPI_COMM_WORLD_RANK" || name == "OMPI_COMM_WORLD_SIZE" ||
                            name == "OMPI_COMM_WORLD_LOCAL_RANK" || name == "OMPI_COMM_WORLD_LOCAL_SIZE");
  };
  for (const auto& [name, value] : env) {
    if ((envmap::IsLauncherPrivate(name) && !own_rank_variable(name)) || name == rendezvous::kTokenEnvVar ||
        name.starts_with(kRoleEnvVarPrefix))
      continue;
    if (hide_slurm_task && envmap::IsSlurmTaskVariable(name)) continue;
    w.inherited.emplace(name, value);
  }
  for (int local_rank = 0; local_rank < n; ++local_rank) w.redirected.push_back(StdFor(o.redirects, local_rank));
  w.console_ranks = o.local_ranks_filter;
  if (o.tag_format) w.tag_format = o.tag_format;
  else if (!o.no_tag && (n > 1 || o.max_nodes > 1)) w.tag_format = "[{rank}]: ";
  if (w.tag_format) {
    if (Result<std::string> t = RenderTag(*w.tag_format, TagFields{}, 0); !t.ok()) return t.status();
  }
  w.bind_to = o.bind_to;
  w.gpus = facts.gpus;
  w.pin_gpu = o.pin_gpu;
  w.shutdown_timeout = o.shutdown_timeout;
  w.stop_signals = StopSignals(o);
  w.hang_timeout = o.hang_timeout;
  w.hang_stop = o.hang_stop;
  w.python_hook = !o.no_python_hook && o.hang_timeout.count() > 0;

  if (plan.mode == Mode::kRendezvous) {
    Result<std::string> token = ResolveToken(o, env);
    if (!token.ok()) return token.status();
    r.token = *token;
    Result<std::vector<HostEntry>> hosts = NodeList(o);
    if (!hosts.ok()) return hosts.status();
    for (const HostEntry& h : *hosts) r.node_list.push_back(h.host);
    if (!r.node_list.empty()) r.min_nodes = r.max_nodes = static_cast<int>(r.node_list.size());
    r.coordinator =
        CoordinatorOptionsFor(o, r.coordinator.run_id, r.min_nodes, r.max_nodes, o.max_restarts, r.token);
    r.coordinator.node_list = r.node_list;
  } else {
    // Given, or the Azure ML dialect's; else RunStatic picks (a free port on one
    // node, torch's 29500 across nodes).
    if (!o.master_port && o.env_azure) layout.master_port = envmap::kAzureMasterPort;
  }
  RecordOrigins(typed, o, *surroundings, plan);
  return plan;
}

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kSingleNode: return "single-node";
    case Mode::kStatic: return "static";
    case Mode::kRendezvous: return "rendezvous";
    case Mode::kHead: return "head";
  }
  return "?";
}

void SetMpiEndpoint(Plan& plan, const std::string& endpoint) {
  plan.rendezvous.endpoint = endpoint;
  plan.rendezvous.is_host = plan.rendezvous.requested_node_rank == 0;
  plan.rendezvous.from_mpi = false;
}

std::string Explain(const Plan& plan) {
  const envmap::Detected& d = plan.detected;
  std::string out = fmt::format("source: {}{}\n", envmap::SourceName(d.source),
                                plan.layout_from_flags && d.source != Source::kLocal ? " (not used: flags fix the layout)" : "");
  for (const std::string& e : d.evidence) out += fmt::format("  {}\n", e);

  const RendezvousPlan& r = plan.rendezvous;
  const StaticPlan& s = plan.layout;
  if (plan.mode == Mode::kRendezvous && !r.from_mpi) {
    out += fmt::format("mode: TCP rendezvous at {}{}, run id {}\n", r.endpoint,
                       r.is_host ? (*r.is_host ? " (hosted here)" : " (hosted elsewhere)") : "", r.coordinator.run_id);
  } else if (plan.mode == Mode::kRendezvous) {
    out += "mode: TCP rendezvous at rank 0's address, learnt through an Open MPI bootstrap\n";
  } else if (plan.mode == Mode::kStatic) {
    out += fmt::format("mode: static multi-node, master {}:{}\n", s.master_addr,
                       s.master_port.value_or(rendezvous::kDefaultMasterPort));
  } else {
    out += "mode: single node\n";
  }
  out += fmt::format("nodes: {}, this node's rank: {}\n",
                     r.min_nodes == r.max_nodes ? fmt::format("{}", r.max_nodes) : fmt::format("{}:{}", r.min_nodes, r.max_nodes),
                     r.requested_node_rank >= 0 ? fmt::format("{}", r.requested_node_rank) : "assigned by the coordinator");
  const WorkerPlan& w = plan.workers;
  if (w.flavors.per_node) {
    out += "workers on this node: 1 per-node launcher (--launch-mode per-node)\n";
  } else if (const auto& v = w.process_view) {
    out += fmt::format("workers: this dlaunch runs 1 (per-process): RANK {} of {}, LOCAL_RANK {} of {}, node {} of {}\n",
                       s.node_rank, s.nnodes, v->local_rank, v->local_world_size, v->node_rank, v->nnodes);
  } else {
    out += fmt::format("workers on this node: {}\n", w.nproc);
  }
  if (!w.argv.empty()) out += fmt::format("command: {}\n", fmt::join(w.argv, " "));
  if (!plan.origins.empty()) {
    out += "where each value came from:\n";
    for (const Origin& o : plan.origins) out += fmt::format("  {}: {} ({})\n", o.what, o.value, o.from);
  }
  return out;
}

}  // namespace dlaunch::launcher
