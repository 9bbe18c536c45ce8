// dlaunch: a native launcher for distributed training.
//
// main() reads the outside world once (argv, environment, machine), decides the
// job layout, and hands a RunPlan to the runner. It is the only place that turns
// a failed Status into an exit code: 2 for bad input, 127 for a missing command.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "envmap/detect.hpp"
#include "envmap/worker_env.hpp"
#include "launcher/config/cli.hpp"
#include "launcher/config/command.hpp"
#include "launcher/config/surroundings.hpp"
#include "launcher/core/event_loop.hpp"
#include "launcher/core/exit.hpp"
#include "launcher/core/output.hpp"
#include "launcher/core/system.hpp"
#include "launcher/modes/daemon.hpp"
#include "launcher/modes/head.hpp"
#include "launcher/modes/mpi_bootstrap.hpp"
#include "launcher/modes/multinode.hpp"
#include "launcher/process/adopted.hpp"
#include "launcher/process/process.hpp"
#include "launcher/process/runner.hpp"
#include "rendezvous/auth.hpp"

namespace fs = std::filesystem;
using namespace dlaunch;
using namespace dlaunch::launcher;

namespace {

// torch.distributed.launch's default port for static multi-node jobs.
constexpr int kDefaultMasterPort = 29500;

std::string RandomRunId() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

Result<int> ResolveNproc(const Options& o, const envmap::EnvMap& env) {
  std::vector<std::string> gpus = VisibleGpus(env);
  switch (o.nproc_kind) {
    case NprocKind::kNumber: return o.nproc;
    case NprocKind::kCpu: return CpuCount();
    case NprocKind::kAuto: return gpus.empty() ? 1 : static_cast<int>(gpus.size());
    case NprocKind::kGpu:
      if (gpus.empty()) return Status::InvalidArgument("--nproc-per-node: 'gpu' given but no GPU is visible");
      return static_cast<int>(gpus.size());
  }
  return 1;
}

// A writable, existing directory, or an error naming `flag` and the path.
Status EnsureDirectory(const std::string& flag, const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return Status::InvalidArgument(fmt::format("{} {}: cannot create ({})", flag, path, ec.message()));
  if (access(path.c_str(), W_OK) != 0)
    return Status::InvalidArgument(fmt::format("{} {}: not writable", flag, path));
  return Status::Ok();
}

// torch.distributed.launch's static multi-node form (and every single-node job):
// the layout comes from the flags alone. Every node is assumed to run as many
// workers as this one, as that launcher assumes.
int RunStatic(const Options& o, int n, RunPlan& plan, Watchdog& watchdog, EventLoop& loop, Console& console) {
  envmap::JobLayout& layout = plan.layout;
  layout.node_rank = o.node_rank;
  layout.master_addr = o.master_addr;
  std::string host = HostName();
  for (int i = 0; i < o.max_nodes; ++i) {
    bool self = i == o.node_rank;
    std::string addr = self ? (o.local_addr.empty() ? (o.max_nodes == 1 ? o.master_addr : host) : o.local_addr)
                            : (i == 0 ? o.master_addr : fmt::format("node{}", i));
    layout.nodes.push_back(envmap::Node{self ? host : addr, addr, n, {}});
  }

  // Ports. MASTER_PORT stays bound (SO_REUSEADDR, not listening) for the whole
  // job: nothing else can be handed it, and torch's TCPStore, which sets
  // SO_REUSEADDR too, still binds it. TF task ports are let go just before the
  // workers start, since not every server sets SO_REUSEADDR.
  PortReservation master_hold;
  std::vector<PortReservation> task_holds;
  bool hosts_master = o.node_rank == 0;
  int default_port = o.env_azure ? envmap::kAzureMasterPort : 0;
  if (o.master_port || default_port != 0) {
    layout.master_port = o.master_port.value_or(default_port);
    if (hosts_master) {
      Result<PortReservation> r = PortReservation::Exactly(layout.master_port, fmt::format("--master-port {}", layout.master_port));
      if (!r.ok()) return Fail(kExitUsage, r.status().message());
      master_hold = std::move(*r);
    }
  } else if (o.max_nodes == 1) {
    Result<PortReservation> r = PortReservation::AnyFree();
    if (!r.ok()) return Fail(1, r.status().message());
    layout.master_port = r->port();
    master_hold = std::move(*r);
  } else {
    layout.master_port = kDefaultMasterPort;
  }
  if (!o.roles.empty()) {
    for (int i = 0; i < n; ++i) {
      Result<PortReservation> r = PortReservation::AnyFree();
      if (!r.ok()) return Fail(1, r.status().message());
      layout.nodes[static_cast<size_t>(o.node_rank)].task_ports.push_back(r->port());
      task_holds.push_back(std::move(*r));
    }
  }
  if (Status s = envmap::Validate(layout); !s.ok()) return Fail(kExitUsage, s.message());

  task_holds.clear();  // the TF tasks bind their ports now
  PrintNotices(plan, console);
  std::unique_ptr<WorkerRun> run =
      StartJob(plan, watchdog, loop.io(), console, nullptr, [&loop](int code) { loop.Exit(code); });
  return loop.Run();
}

}  // namespace

int main(int argc, char** argv) {
  envmap::EnvMap env = ReadEnvironment();
  if (argc > 1 && std::string_view(argv[1]) == "coordinator")
    return RunCoordinatorDaemon(std::vector<std::string>(argv + 2, argv + argc), env);
  Result<Options> parsed = ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc), env);
  if (!parsed.ok()) return Fail(kExitUsage, parsed.status().message());
  Options o = std::move(*parsed);
  if (o.help) {
    std::fputs(UsageText().c_str(), stdout);
    return 0;
  }
  if (o.version) {
    std::puts("dlaunch 0.1.0");
    return 0;
  }

  // The head of a job over ssh: the nodes resolve their own worker counts.
  if (IsHeadLaunch(o)) return o.explain ? ExplainHead(o, env) : RunHead(o, env);

  // How many workers, and as what.
  Result<int> nproc = ResolveNproc(o, env);
  if (!nproc.ok()) return Fail(kExitUsage, nproc.status().message());
  int n = *nproc;
  if (o.launch_mode == "per-node") {
    if (!o.roles.empty()) return Fail(kExitUsage, "--launch-mode per-node: cannot be combined with --roles");
    n = 1;  // the command is itself a launcher and starts this node's workers
  }

  // Where it runs: Slurm, mpirun, Azure ML, TF_CONFIG, unless flags fixed the layout.
  Result<envmap::Detected> detected = envmap::Detect(env);
  if (!detected.ok() && !o.layout_given) return Fail(kExitUsage, detected.status().message());
  // Several tasks on this machine (mpirun -np 8, srun --ntasks-per-node=8): each
  // is one worker unless --nproc-per-node says otherwise, rather than one per
  // visible GPU each.
  if (detected.ok() && !o.layout_given && !o.nproc_given && detected->has_process_view && detected->local_size > 1)
    n = 1;
  Result<Surroundings> surroundings = ApplySurroundings(detected.ok() ? *detected : envmap::Detected{}, n, o);
  if (!surroundings.ok()) return Fail(kExitUsage, surroundings.status().message());
  if (o.explain) {
    std::string text = Explain(*surroundings, o, n, o.command.empty() ? std::vector<std::string>{} : WorkerArgv(o, env));
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  if (surroundings->needs_mpi_bootstrap) {
    if (Status s = RendezvousThroughMpi(o); !s.ok()) return Fail(kExitUsage, s.message());
  }
  if (!o.roles.empty()) {
    int total = 0;
    for (const envmap::RoleSpec& r : o.roles) total += r.count;
    n = total;
  }
  for (int r : o.local_ranks_filter)
    if (r >= n)
      return Fail(kExitUsage, fmt::format("--local-ranks-filter: local rank {} is outside this node (0-{})", r, n - 1));

  // The command.
  std::vector<std::string> worker_argv = WorkerArgv(o, env);
  Result<std::string> exe = ResolveCommand(worker_argv[0]);
  if (!exe.ok())
    return Fail(exe.status().code() == Code::kNotFound ? kExitNotFound : kExitNotExecutable, exe.status().message());

  RunPlan plan;
  plan.layout.run_id = o.rdzv_id.empty() ? RandomRunId() : o.rdzv_id;
  plan.layout.max_restarts = o.max_restarts;
  plan.layout.role = o.role;
  plan.layout.roles = o.roles;
  plan.layout.process_view = o.process_view;

  // Where error files and logs go.
  plan.write_logs = !o.log_dir.empty() || o.redirects != "0" || o.tee != "0";
  if (!o.log_dir.empty()) {
    if (Status s = EnsureDirectory("--log-dir", o.log_dir); !s.ok()) return Fail(kExitUsage, s.message());
    plan.work_dir = fmt::format("{}/{}", o.log_dir, plan.layout.run_id);
  } else {
    // Under $TMPDIR when it is usable, else /tmp, as Python's tempfile (torchrun) does.
    const char* tmpdir = std::getenv("TMPDIR");
    std::string tmpl = tmpdir != nullptr && *tmpdir == '/' ? fmt::format("{}/dlaunch-XXXXXX", tmpdir) : "";
    if (tmpl.empty() || mkdtemp(tmpl.data()) == nullptr) {
      tmpl = "/tmp/dlaunch-XXXXXX";
      if (mkdtemp(tmpl.data()) == nullptr)
        return Fail(1, fmt::format("/tmp: cannot create a run directory ({})", std::strerror(errno)));
    }
    plan.work_dir = tmpl;
  }

  plan.flavors.ompi = o.env_ompi;
  plan.flavors.azure = o.env_azure;
  plan.flavors.horovod = o.env_horovod;
  plan.flavors.per_node = o.launch_mode == "per-node";
  if (o.env_azure) plan.flavors.azure_hostfile = plan.work_dir + "/hostfile";
  if (o.legacy_launch && !o.use_env)
    plan.flavors.local_rank_arg = o.local_rank_underscore ? envmap::LocalRankArg::kUnderscore : envmap::LocalRankArg::kDash;
  // mpirun's per-process variables describe dlaunch, not its workers: a worker's
  // own MPI_Init must not take dlaunch's identity (--env ompi sets the workers' own).
  // The rendezvous secret is dlaunch's alone, too, and so is Slurm's task view
  // when this task runs several workers.
  bool hide_slurm_task = surroundings->applied && surroundings->detected.source == envmap::Source::kSlurm &&
                         !o.process_view;
  for (const auto& [name, value] : env) {
    if (envmap::IsLauncherPrivate(name) || name == rendezvous::kTokenEnvVar) continue;
    if (hide_slurm_task && envmap::IsSlurmTaskVariable(name)) continue;
    plan.inherited.emplace(name, value);
  }
  plan.exe = *exe;
  plan.argv = worker_argv;
  for (int local_rank = 0; local_rank < n; ++local_rank) plan.redirected.push_back(StdFor(o.redirects, local_rank));
  plan.console_ranks = o.local_ranks_filter;
  if (o.tag_format) plan.tag_format = o.tag_format;
  else if (!o.no_tag && (n > 1 || o.max_nodes > 1)) plan.tag_format = "[{rank}]: ";
  if (plan.tag_format) {
    if (Result<std::string> t = RenderTag(*plan.tag_format, TagFields{}, 0); !t.ok())
      return Fail(kExitUsage, t.status().message());
  }
  plan.cpus = CpuPlacement(o.bind_to, n);
  plan.gpus = VisibleGpus(env);
  plan.pin_gpu = o.pin_gpu;
  plan.supervisor = SupervisorOptions{n, o.max_restarts, o.shutdown_timeout};
  plan.stop_signals = o.signals_to_handle.empty() ? std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT}
                                                  : o.signals_to_handle;

  // Supervision: a watchdog kills every worker group if we are killed outright,
  // and orphans of workers come to us, not to init. The watchdog starts first, so
  // that it is not adopted itself (Watchdog::Start).
  signal(SIGPIPE, SIG_IGN);
  Watchdog watchdog;
  if (Status s = watchdog.Start(plan.write_logs ? "" : plan.work_dir); !s.ok()) return Fail(1, s.message());
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  EventLoop loop;
  Console console(loop.io(), STDOUT_FILENO, STDERR_FILENO);
  // Daemons that workers left behind (setsid, double fork) come to this subreaper:
  // the watchdog learns of them while the job runs, and they end with it.
  Adopted adopted(watchdog);
  adopted.Start(loop.io());
  int code = UsesRendezvous(o) ? RunMultiNode(o, env, plan, watchdog, loop, console)
                               : RunStatic(o, n, plan, watchdog, loop, console);
  adopted.KillAll();
  watchdog.Stop();
  if (!plan.write_logs) {
    std::error_code ec;
    fs::remove_all(plan.work_dir, ec);
  } else if (o.log_dir.empty()) {
    console.Say(fmt::format("logs are in {}", plan.work_dir));
  }
  // No line lost: wait for a slow reader, but not past a stop signal.
  console.Drain(plan.stop_signals);
  return code;
}
