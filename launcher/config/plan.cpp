#include "launcher/config/plan.hpp"
#include "launcher/config/programs_codec.hpp"

#include <csignal>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/defaults.hpp"
#include "launcher/config/cli.hpp"
#include "launcher/config/command.hpp"
#include "launcher/config/coordinator_options.hpp"
#include "launcher/config/log_prefix.hpp"
#include "launcher/config/metrics_addr.hpp"
#include "launcher/config/surroundings.hpp"
#include "launcher/core/output.hpp"
#include "launcher/core/text.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/coordinator.hpp"

namespace dlaunch::launcher {

namespace {

using envmap::Source;

// A node list without a rendezvous starts the job from here, unless --node-rank
// says this is one node of the static form: the list then names its nodes.
bool IsHeadLaunch(const Options& o) {
  return (!o.hostfile.empty() || !o.host_list.empty() || !o.nodes.empty()) && o.rdzv_endpoint.empty() &&
         !o.node_rank_given;
}

// --nproc-per-node's count on this machine, as torchrun's
// determine_local_world_size: `auto` typed is one per GPU, else os.cpu_count();
// `cpu` is os.cpu_count(); `gpu` is one per GPU, or an error. dlaunch's own
// default (the entrypoint form's implicit `auto`) is one per GPU, else 1: it
// would not start a process per CPU unasked.
Result<int> ResolveNproc(const Options& o, const MachineFacts& facts) {
  int gpus = static_cast<int>(facts.gpus.size());
  switch (o.nproc_kind) {
    case NprocKind::kNumber:
      return o.nproc;
    case NprocKind::kCpu:
      return facts.cpus;
    case NprocKind::kAuto:
      return gpus > 0 ? gpus : o.nproc_given ? facts.cpus : 1;
    case NprocKind::kGpu:
      if (gpus == 0) return Status::InvalidArgument("--nproc-per-node: 'gpu' given but no GPU is visible");
      return gpus;
  }
  return 1;
}

// Why --nproc-per-node auto, gpu or cpu came to the count it did, for --explain.
std::string NprocReason(const Options& o, const MachineFacts& facts) {
  int gpus = static_cast<int>(facts.gpus.size());
  std::string cpus = fmt::format("os.cpu_count(): {} online CPU(s), as torchrun", facts.cpus);
  switch (o.nproc_kind) {
    case NprocKind::kNumber:
      return "";
    case NprocKind::kCpu:
      return fmt::format("cpu: {}", cpus);
    case NprocKind::kGpu:
      return fmt::format("gpu: {} visible GPU(s)", gpus);
    case NprocKind::kAuto:
      if (gpus > 0) return fmt::format("auto: {} visible GPU(s)", gpus);
      return fmt::format("auto: no GPU visible, so {}", cpus);
  }
  return "";
}

// Where flag `name`'s value came from: "--name", "PET_NAME", or `otherwise`.
std::string From(const Options& o, std::string_view name, std::string otherwise = "default") {
  auto it = o.given.find(name);
  return it != o.given.end() ? it->second : otherwise;
}

Status DecideHead(const Options& o, const envmap::EnvMap& env, Plan& plan) {
  Result<std::vector<HostEntry>> hosts = NodeList(o);
  if (!hosts.ok()) return hosts.status();
  Result<HeadPlan> head = HeadPlanFor(o, env, std::move(*hosts));
  if (!head.ok()) return head.status();
  plan.origins.push_back({"nodes", fmt::format("{}", head->hosts.size()),
                          !o.hostfile.empty()    ? "--hostfile"
                          : !o.host_list.empty() ? "-H"
                                                 : "--nodes"});
  plan.origins.push_back({"workers per node", fmt::format("{}", fmt::join(head->workers, ",")),
                          From(o, "nproc-per-node", "the node list's slots, else each node's own")});
  plan.run = std::move(*head);
  return Status::Ok();
}

// How many workers each dlaunch runs, before TF roles share them out.
Result<int> WorkersPerDlaunch(const Options& o, const Result<envmap::Detected>& detected, const MachineFacts& facts) {
  Result<int> nproc = ResolveNproc(o, facts);
  if (!nproc.ok()) return nproc.status();
  if (o.launch_mode == "per-node") {
    if (!o.roles.empty()) return Status::InvalidArgument("--launch-mode per-node: cannot be combined with --roles");
    return 1;  // the command is itself a launcher and starts this node's workers
  }
  // Several tasks on this machine (mpirun -np 8, srun --ntasks-per-node=8): each
  // is one worker unless --nproc-per-node says otherwise, rather than one per
  // visible GPU each.
  if (detected.ok() && !FixesLayout(o) && !o.nproc_given && detected->has_process_view && detected->local_size > 1)
    return 1;
  return *nproc;
}

// What the workers inherit: the launcher's environment less what is dlaunch's
// alone. mpirun's per-process variables describe dlaunch, not its workers: a
// worker's own MPI_Init must not take dlaunch's identity (--env ompi sets the
// workers' own). The rendezvous secret is dlaunch's alone, too, and so is
// Slurm's task view when this task runs several workers, or a per-node launcher
// that must not take the task's rank for its own (Lightning reads SLURM_PROCID).
envmap::EnvMap Inherited(const envmap::EnvMap& env, const Surroundings& s, bool per_node, int n) {
  const std::optional<envmap::ProcessView>& view = s.shape.process_view;
  bool hide_slurm_task = s.applied && s.detected.source == Source::kSlurm && (!view || per_node);
  // One worker per mpirun rank: that worker *is* the rank, so its
  // OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK and _LOCAL_SIZE are its own and
  // stay (the seeds' aml_mpienv.py and DeepSpeed's Azure ML patch read them);
  // the PMIx variables still go, so its own MPI_Init starts afresh.
  bool own_mpi_rank = s.applied && s.detected.source == Source::kOpenMpi && view.has_value() && !per_node && n == 1;
  auto own_rank_variable = [&](const std::string& name) {
    return own_mpi_rank && (name == "OMPI_COMM_WORLD_RANK" || name == "OMPI_COMM_WORLD_SIZE" ||
                            name == "OMPI_COMM_WORLD_LOCAL_RANK" || name == "OMPI_COMM_WORLD_LOCAL_SIZE");
  };
  envmap::EnvMap inherited;
  for (const auto& [name, value] : env) {
    if ((envmap::IsLauncherPrivate(name) && !own_rank_variable(name)) || name == rendezvous::kTokenEnvVar ||
        name.starts_with(kRoleEnvVarPrefix) || name == kProgramsVar)
      continue;
    if (hide_slurm_task && envmap::IsSlurmTaskVariable(name)) continue;
    inherited.emplace(name, value);
  }
  return inherited;
}

// The output's shape: which streams go to files, which ranks to the console, the tag.
Status DecideOutput(const Options& o, const Shape& shape, const envmap::EnvMap& env, WorkerPlan& w) {
  int n = w.nproc;
  for (int local_rank : o.local_ranks_filter)
    if (local_rank >= n)
      return Status::InvalidArgument(
          fmt::format("--local-ranks-filter: local rank {} is outside this node (0-{})", local_rank, n - 1));
  w.log_dir = o.log_dir;
  w.events = o.events;
  w.write_logs = !o.log_dir.empty() || o.redirects != "0" || o.tee != "0";
  // As torch's start_processes: a tee'd stream goes to its file and to the
  // console, so tee wins over a redirect of the same stream, per local rank.
  for (int local_rank = 0; local_rank < n; ++local_rank)
    w.redirected.push_back(StdFor(o.redirects, local_rank) & ~StdFor(o.tee, local_rank));
  w.console_ranks = o.local_ranks_filter;
  // A typed --tag-output or --no-tag wins over torch's variable, as a flag over
  // its PET_ default; the variable is not read then.
  if (o.tag_format) {
    w.tag_format = o.tag_format;
  } else if (!o.no_tag) {
    Result<std::optional<std::string>> from_env = TagFromEnvironment(env);
    if (!from_env.ok()) return from_env.status();
    if (*from_env)
      w.tag_format = **from_env;
    else if (n > 1 || shape.max_nodes > 1)
      w.tag_format = "[{rank}]: ";
  }
  if (w.tag_format) {
    if (Result<std::string> t = RenderTag(*w.tag_format, TagFields{}, 0); !t.ok()) return t.status();
  }
  // The run's directory goes under --log-dir by this name (launcher/modes/local.cpp).
  if (!o.log_dir.empty() &&
      (w.log_name.empty() || w.log_name == "." || w.log_name == ".." || w.log_name.find('/') != std::string::npos))
    return Status::InvalidArgument(
        fmt::format("--log-dir {}: run id '{}' cannot name a directory in it", o.log_dir, Printable(w.log_name)));
  return Status::Ok();
}

// --virtual-local-rank: every local rank must find its GPU in
// CUDA_VISIBLE_DEVICES, where torch 2.x fails the worker group's start.
Status CheckVirtualLocalRank(const envmap::EnvMap& inherited, const Shape& shape, int n, bool per_node) {
  if (per_node)
    return Status::InvalidArgument(
        "--virtual-local-rank: not with --launch-mode per-node (the command is a launcher that sets LOCAL_RANK "
        "itself)");
  int first = shape.process_view ? shape.process_view->local_rank : 0;
  int last = shape.process_view ? first : n - 1;
  for (int local_rank = first; local_rank <= last; ++local_rank) {
    if (envmap::VirtualGpu(inherited, local_rank)) continue;
    return Status::InvalidArgument(
        fmt::format("--virtual-local-rank: local rank {} has no GPU in CUDA_VISIBLE_DEVICES={} ({} for {} workers)",
                    local_rank, Printable(inherited.at("CUDA_VISIBLE_DEVICES")),
                    Split(inherited.at("CUDA_VISIBLE_DEVICES"), ',').size(), last + 1));
  }
  return Status::Ok();
}

// This node's workers: how many, the command, what they inherit, how they are
// watched and where their output goes.
Result<WorkerPlan> DecideWorkers(const Options& o, const Surroundings& s, int n, bool rendezvous,
                                 const MachineFacts& facts, const envmap::EnvMap& env) {
  const Shape& shape = s.shape;
  bool per_node = o.launch_mode == "per-node";
  WorkerPlan w;
  w.process_view = shape.process_view;
  w.flavors.per_node = per_node;
  if (!o.command.empty()) w.argv = WorkerArgv(o, env);
  w.local_rank_arg_at = LocalRankArgAt(o, w.argv);
  // TF roles: the tasks take global ranks in the order the roles are listed, and
  // nodes take ranks in node-rank order, so each node runs its share (the
  // command line checked that the shares are whole).
  if (!o.roles.empty()) {
    int total = 0;
    for (const envmap::RoleSpec& role : o.roles) total += role.count;
    n = o.nproc_given && o.nproc_kind == NprocKind::kNumber ? o.nproc : total / shape.max_nodes;
  }
  w.nproc = n;
  w.log_name = shape.rdzv_id.empty() ? facts.fresh_id : shape.rdzv_id;
  // torchrun's default id is "none". A job of one node keeps its fresh id, which
  // tells its runs apart in events and logs; the nodes of a static job must
  // agree on one, and draw theirs apart, so they say "none" as torchrun does.
  bool one_id = rendezvous || shape.max_nodes > 1;
  w.run_id = !shape.rdzv_id.empty() ? shape.rdzv_id : one_id ? "none" : w.log_name;
  w.max_restarts = o.max_restarts;
  Result<RecoveryFlags> recovery = ReadRecoveryFlags(o);
  if (!recovery.ok()) return recovery.status();
  w.recovery = *recovery;
  Result<StragglerFlags> straggler = StragglerFlagsFor(o);
  if (!straggler.ok()) return straggler.status();
  w.straggler = std::move(*straggler);
  w.role = o.role;
  w.roles = o.roles;
  w.flavors.ompi = o.env_ompi;
  w.flavors.azure = o.env_azure;
  w.flavors.horovod = o.env_horovod;
  if (o.legacy_launch && !o.use_env)
    w.flavors.local_rank_arg =
        o.local_rank_underscore ? envmap::LocalRankArg::kUnderscore : envmap::LocalRankArg::kDash;
  w.inherited = Inherited(env, s, per_node, n);
  if (Status st = DecideOutput(o, shape, env, w); !st.ok()) return st;
  if (o.virtual_local_rank) {
    if (Status st = CheckVirtualLocalRank(w.inherited, shape, n, per_node); !st.ok()) return st;
    w.flavors.virtual_local_rank = true;
  }
  w.bind_to = o.bind_to;
  w.gpus = facts.gpus;
  w.pin_gpu = o.pin_gpu;
  w.shutdown_timeout = o.shutdown_timeout;
  w.stop_signals = StopSignals(o);
  w.hang_timeout = o.hang_timeout;
  w.hang_stop = o.hang_stop;
  w.python_hook = !o.no_python_hook && o.hang_timeout.count() > 0;
  return w;
}

Result<StaticPlan> DecideStatic(const Options& o, const Shape& shape) {
  StaticPlan layout;
  Result<std::vector<HostEntry>> hosts = NodeList(o);
  if (!hosts.ok()) return hosts.status();
  for (const HostEntry& h : *hosts) layout.node_list.push_back(h.host);
  if (!layout.node_list.empty() && layout.node_list.size() != static_cast<size_t>(shape.max_nodes)) {
    return Status::InvalidArgument(fmt::format("{}: {} host(s), but --nnodes is {}",
                                               !o.hostfile.empty()    ? o.hostfile
                                               : !o.host_list.empty() ? "-H"
                                                                      : "--nodes",
                                               layout.node_list.size(), shape.max_nodes));
  }
  layout.nnodes = shape.max_nodes;
  layout.node_rank = shape.node_rank;
  layout.master_addr = shape.master_addr;
  layout.master_port = shape.master_port;
  // Given, or the Azure ML dialect's; else RunStatic picks (a free port on one
  // node, torch's 29500 across nodes).
  if (!layout.master_port && o.env_azure) layout.master_port = base::kAzureMasterPort;
  layout.local_addr = o.local_addr;
  layout.hosts_master = shape.node_rank == 0;
  return layout;
}

Result<RendezvousPlan> DecideRendezvous(const Options& o, const Surroundings& s, const MachineFacts& facts,
                                        const envmap::EnvMap& env) {
  const Shape& shape = s.shape;
  RendezvousPlan r;
  r.from_mpi = s.needs_mpi_bootstrap;
  r.is_host = o.is_host;
  r.min_nodes = shape.min_nodes;
  r.max_nodes = shape.max_nodes;
  r.requested_node_rank = shape.node_rank_known ? shape.node_rank : -1;
  r.local_addr = o.local_addr;
  r.host_name = facts.host_name;
  r.master_port = shape.master_port;
  r.join_timeout = o.join_timeout;
  r.heartbeat_timeout = o.heartbeat_timeout;
  Result<HealthCheckPlan> health = HealthCheckFor(o);
  if (!health.ok()) return health.status();
  r.health = std::move(*health);
  Result<std::string> token = ResolveToken(o, env);
  if (!token.ok()) return token.status();
  r.token = *token;
  Result<std::vector<HostEntry>> hosts = NodeList(o);
  if (!hosts.ok()) return hosts.status();
  for (const HostEntry& h : *hosts) r.node_list.push_back(h.host);
  if (!r.node_list.empty()) r.min_nodes = r.max_nodes = static_cast<int>(r.node_list.size());
  std::string run_id = shape.rdzv_id.empty() ? "none" : shape.rdzv_id;  // torchrun's default id
  r.coordinator =
      CoordinatorOptionsFor(o, shape.master_port, run_id, r.min_nodes, r.max_nodes, o.max_restarts, r.token);
  r.coordinator.node_list = r.node_list;
  r.endpoint = shape.rdzv_endpoint;  // nullopt while the MPI bootstrap is to find it
  return r;
}

// The layout values, where the surroundings set them or a flag did.
void RecordOrigins(const Options& typed, const Surroundings& s, const WorkerPlan& w, const MachineFacts& facts,
                   Plan& plan) {
  const Shape& shape = s.shape;
  std::string env_source = s.applied ? std::string(envmap::SourceName(s.detected.source)) : "";
  auto from = [&](std::string_view flag, bool surroundings_set_it) -> std::string {
    if (typed.given.contains(flag)) return From(typed, flag);
    return surroundings_set_it ? env_source : std::string("default");
  };
  std::string reason = NprocReason(typed, facts);
  plan.origins.push_back({"workers per node", fmt::format("{}", w.nproc),
                          typed.launch_mode == "per-node" ? "--launch-mode per-node"
                          : typed.nproc_given && !reason.empty()
                              ? fmt::format("{} {}", From(typed, "nproc-per-node"), reason)
                          : typed.nproc_given ? From(typed, "nproc-per-node")
                          : typed.nproc_kind == NprocKind::kAuto
                              ? (s.applied && s.detected.has_process_view ? env_source : "the visible GPUs (auto)")
                              : "default"});
  plan.origins.push_back({"nodes",
                          shape.min_nodes == shape.max_nodes ? fmt::format("{}", shape.max_nodes)
                                                             : fmt::format("{}:{}", shape.min_nodes, shape.max_nodes),
                          from("nnodes", s.applied)});
  if (shape.node_rank_known)
    plan.origins.push_back({"node rank", fmt::format("{}", shape.node_rank), from("node-rank", s.applied)});
  if (const auto* agent = std::get_if<AgentPlan>(&plan.run)) {
    const RendezvousPlan& r = agent->rendezvous;
    plan.origins.push_back({"rendezvous endpoint", r.endpoint ? r.endpoint->ToString() : "(rank 0's)",
                            r.from_mpi ? "an Open MPI bootstrap"
                                       : from("rdzv-endpoint", s.applied && !typed.given.contains("rdzv-endpoint"))});
    plan.origins.push_back({"run id", r.coordinator.run_id, from("rdzv-id", s.applied && !s.detected.run_id.empty())});
  } else if (plan.mode() == Mode::kStatic) {
    plan.origins.push_back(
        {"master", fmt::format("{}:{}", shape.master_addr, shape.master_port.value_or(base::kDefaultMasterPort)),
         from("master-addr", s.applied && !s.detected.master_addr.empty())});
  }
  plan.origins.push_back({"command", fmt::format("{}", fmt::join(w.argv, " ")),
                          typed.after_dashdash || typed.no_python ? "as given"
                          : typed.module                          ? "-m: the module in python3 -u"
                                                                  : "a script: python3 -u prepended, as torchrun"});
}

}  // namespace

Result<Plan> Decide(const Options& typed, const Result<envmap::Detected>& detected, const MachineFacts& facts,
                    const envmap::EnvMap& env) {
  Plan plan;
  plan.explain = typed.explain;
  plan.layout_from_flags = FixesLayout(typed);
  if (detected.ok()) plan.detected = *detected;
  if (IsHeadLaunch(typed)) {
    if (Status s = DecideHead(typed, env, plan); !s.ok()) return s;
    return plan;
  }
  Result<int> n = WorkersPerDlaunch(typed, detected, facts);
  if (!n.ok()) return n.status();
  // Where it runs: Slurm, mpirun, Azure ML, TF_CONFIG, unless flags fixed the layout.
  if (!detected.ok() && !plan.layout_from_flags) return detected.status();
  Result<Surroundings> surroundings = ApplySurroundings(plan.detected, *n, typed);
  if (!surroundings.ok()) return surroundings.status();
  bool rendezvous = surroundings->shape.rdzv_endpoint.has_value() || surroundings->needs_mpi_bootstrap;
  Result<WorkerPlan> workers = DecideWorkers(typed, *surroundings, *n, rendezvous, facts, env);
  if (!workers.ok()) return workers.status();
  Result<std::optional<rendezvous::HostPort>> metrics = MetricsAddrFor(typed.metrics_addr, env);
  if (!metrics.ok()) return metrics.status();
  workers->metrics_addr = *metrics;
  if (rendezvous) {
    Result<RendezvousPlan> r = DecideRendezvous(typed, *surroundings, facts, env);
    if (!r.ok()) return r.status();
    plan.run = AgentPlan{std::move(*workers), std::move(*r)};
  } else {
    // Only a rendezvous node can stay out of a job and join it later, or wait
    // to replace a lost one.
    for (const auto& [name, value] : typed.typed)
      if (name.starts_with("health-check") || name == "spares")
        return Status::InvalidArgument(fmt::format(
            "--{}: only a rendezvous node {} (--rdzv-backend c10d --rdzv-endpoint HOST:PORT, or a head launch's "
            "nodes)",
            name, name == "spares" ? "can wait as a spare" : "checks itself before it joins"));
    Result<StaticPlan> layout = DecideStatic(typed, surroundings->shape);
    if (!layout.ok()) return layout.status();
    plan.run = NodePlan{std::move(*workers), std::move(*layout)};
  }
  RecordOrigins(typed, *surroundings, *plan.workers(), facts, plan);
  return plan;
}

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kSingleNode:
      return "single-node";
    case Mode::kStatic:
      return "static";
    case Mode::kRendezvous:
      return "rendezvous";
    case Mode::kHead:
      return "head";
  }
  return "?";
}

Mode Plan::mode() const {
  if (std::holds_alternative<HeadPlan>(run)) return Mode::kHead;
  if (std::holds_alternative<AgentPlan>(run)) return Mode::kRendezvous;
  return std::get<NodePlan>(run).layout.nnodes > 1 ? Mode::kStatic : Mode::kSingleNode;
}

const WorkerPlan* Plan::workers() const {
  if (const auto* node = std::get_if<NodePlan>(&run)) return &node->workers;
  if (const auto* agent = std::get_if<AgentPlan>(&run)) return &agent->workers;
  return nullptr;
}

Result<AgentPlan> WithMpiEndpoint(const AgentPlan& plan, const std::string& endpoint) {
  Result<rendezvous::HostPort> parsed =
      rendezvous::ParseHostPort(endpoint, base::kDefaultRdzvPort, "dlaunch-mpi-bootstrap's endpoint");
  if (!parsed.ok()) return parsed.status();
  AgentPlan out = plan;
  out.rendezvous.endpoint = std::move(*parsed);
  out.rendezvous.is_host = out.rendezvous.requested_node_rank == 0;
  out.rendezvous.from_mpi = false;
  return out;
}

Plan WithInherited(const Plan& plan, const std::string& name, const std::string& value) {
  Plan out = plan;
  std::visit(
      [&](auto& p) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(p)>, HeadPlan>)
          p.workers.inherited.try_emplace(name, value);
      },
      out.run);
  return out;
}

namespace {

// --explain's "mode:" and "nodes:" lines.
std::string ExplainMode(const Plan& plan) {
  if (const auto* agent = std::get_if<AgentPlan>(&plan.run)) {
    const RendezvousPlan& r = agent->rendezvous;
    std::string out = r.endpoint ? fmt::format("mode: TCP rendezvous at {}{}, run id {}\n", r.endpoint->ToString(),
                                               r.is_host ? (*r.is_host ? " (hosted here)" : " (hosted elsewhere)") : "",
                                               r.coordinator.run_id)
                                 : "mode: TCP rendezvous at rank 0's address, learnt through an Open MPI bootstrap\n";
    return out +
           fmt::format(
               "nodes: {}, this node's rank: {}\n",
               r.min_nodes == r.max_nodes ? fmt::format("{}", r.max_nodes)
                                          : fmt::format("{}:{}", r.min_nodes, r.max_nodes),
               r.requested_node_rank >= 0 ? fmt::format("{}", r.requested_node_rank) : "assigned by the coordinator") +
           ExplainHealthCheck(r.health);
  }
  const StaticPlan& s = std::get<NodePlan>(plan.run).layout;
  std::string out = s.nnodes > 1 ? fmt::format("mode: static multi-node, master {}:{}\n", s.master_addr,
                                               s.master_port.value_or(base::kDefaultMasterPort))
                                 : "mode: single node\n";
  return out + fmt::format("nodes: {}, this node's rank: {}\n", s.nnodes, s.node_rank);
}

}  // namespace

std::string Explain(const Plan& plan) {
  const envmap::Detected& d = plan.detected;
  std::string out =
      fmt::format("source: {}{}\n", envmap::SourceName(d.source),
                  plan.layout_from_flags && d.source != Source::kLocal ? " (not used: flags fix the layout)" : "");
  for (const std::string& e : d.evidence) out += fmt::format("  {}\n", e);
  out += ExplainMode(plan);
  const WorkerPlan& w = *plan.workers();
  if (w.flavors.per_node) {
    out += "workers on this node: 1 per-node launcher (--launch-mode per-node)\n";
  } else if (const auto& v = w.process_view) {
    const auto* agent = std::get_if<AgentPlan>(&plan.run);
    int rank = agent ? agent->rendezvous.requested_node_rank : std::get<NodePlan>(plan.run).layout.node_rank;
    int size = agent ? agent->rendezvous.max_nodes : std::get<NodePlan>(plan.run).layout.nnodes;
    out +=
        fmt::format("workers: this dlaunch runs 1 (per-process): RANK {} of {}, LOCAL_RANK {} of {}, node {} of {}\n",
                    rank, size, v->local_rank, v->local_world_size, v->node_rank, v->nnodes);
  } else {
    out += fmt::format("workers on this node: {}\n", w.nproc);
  }
  // Several programs: each group's command is in the groups' lines that follow.
  const bool groups = !w.programs.empty();
  if (!w.argv.empty() && !groups) out += fmt::format("command: {}\n", fmt::join(w.argv, " "));
  if (std::string restarts = ExplainRecovery(w.max_restarts, w.recovery); !restarts.empty()) out += restarts + "\n";
  out += ExplainStraggler(w.straggler);
  if (!plan.origins.empty()) {
    out += "where each value came from:\n";
    for (const Origin& o : plan.origins)
      if (!groups || o.what != "command") out += fmt::format("  {}: {} ({})\n", o.what, o.value, o.from);
  }
  return out;
}

}  // namespace dlaunch::launcher
