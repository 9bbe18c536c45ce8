#include "launcher/modes/local.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <boost/json/array.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include "base/defaults.hpp"
#include "launcher/core/event_loop.hpp"
#include "launcher/core/events.hpp"
#include "launcher/core/exit.hpp"
#include "launcher/core/output.hpp"
#include "launcher/core/private_dir.hpp"
#include "launcher/core/system.hpp"
#include "launcher/core/text.hpp"
#include "launcher/jobwide/horovod_server.hpp"
#include "launcher/live/job_live.hpp"
#include "launcher/live/live.hpp"
#include "launcher/metrics/metrics_service.hpp"
#include "launcher/modes/multinode.hpp"
#include "launcher/process/adopted.hpp"
#include "launcher/process/process.hpp"
#include "launcher/process/progress_files.hpp"
#include "launcher/process/runner.hpp"
#include "launcher/live/straggler_view.hpp"
#include "launcher/modes/programs_glue.hpp"
#include "launcher/modes/straggler_glue.hpp"
#include "launcher/stacks/python_hook.hpp"
#include "launcher/straggler/samples.hpp"
#include "rendezvous/coordinator.hpp"

namespace fs = std::filesystem;

namespace dlaunch::launcher {

namespace {

// Where a job's files go. `run` holds what the user reads (logs, stacks-N.txt):
// --log-dir/RUN_ID, else a fresh directory under $TMPDIR (else /tmp when it
// will hold logs, /dev/shm when it will not: DefaultTempParent). `private_dir`
// holds what dlaunch reads back or runs (the stack hook's dumps, the error
// files, Azure's hostfile; the hook itself, where this user's own directory
// cannot hold it): a directory it has just made (0700), and it goes when the
// job ends. A fresh run directory that will hold no logs is one already: it is
// the private directory too (one mkdir and one rmdir fewer an agent, of the
// few inodes an agent makes: bench/profile/agent.md), and when a hang's stacks
// keep it, everything but them is removed. With logs, or under --log-dir, the
// private one is fresh, elsewhere. A shared
// --log-dir (a 1777 scratch directory) then gives another user nothing to
// plant: RUN_ID and the attempt directories below it are made 0700 or accepted
// only as ours (private_dir.hpp).
struct RunDirs {
  std::string run;
  std::string private_dir;
  bool run_is_fresh = false;  // made for this job: removed at the end unless it holds logs or stacks
  bool private_is_run = false;

  // At the end: the private directory always, the run directory when it is
  // this job's own and `keep_run` is false (no logs, no stacks).
  void Remove(bool keep_run) const {
    std::error_code ec;
    if (!private_is_run) {
      fs::remove_all(private_dir, ec);
      if (run_is_fresh && !keep_run) fs::remove_all(run, ec);
      return;
    }
    if (!keep_run) {
      fs::remove_all(run, ec);
      return;
    }
    // Kept for a hang's stacks-N.txt: the rest was dlaunch's.
    for (fs::directory_iterator it(run, ec), end; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (!(name.starts_with("stacks-") && name.ends_with(".txt"))) fs::remove_all(it->path(), ec);
    }
  }
};

// A fresh private directory under TMPDIR, else under `fallback` (saying why
// once when TMPDIR is set and not used).
Result<std::string> NewPrivateDir(const std::string& fallback = DefaultTempParent()) {
  const char* tmpdir = std::getenv("TMPDIR");
  Result<PrivateDir> made = MakePrivateDir(tmpdir != nullptr ? tmpdir : "", fallback);
  if (!made.ok()) return made.status();
  SayTmpdirNote(made->note);
  return made->path;
}

// The run directory under --log-dir: the directory the user named may be
// shared; it is made (with the umask's mode) when missing, as before, and
// checked either way. With `make` false nothing is made, and what the run
// would refuse is refused all the same (CheckRunFiles, for --explain).
Result<std::string> RunDirUnderLogDir(const WorkerPlan& w, bool make) {
  Result<std::string> log_dir = TrustedDir(w.log_dir, make ? Missing::kMake : Missing::kCheck);
  if (!log_dir.ok()) return Status::InvalidArgument(fmt::format("--log-dir {}", log_dir.status().message()));
  std::string run = fmt::format("{}/{}", *log_dir, w.log_name);  // Decide checked that it names one directory
  struct stat st {};
  if (!make && lstat(log_dir->c_str(), &st) != 0 && errno == ENOENT) return run;  // both would be made fresh
  if (Status s = EnsureOwnDir(run, make); !s.ok())
    return Status::InvalidArgument(fmt::format("--log-dir {}", s.message()));
  return run;
}

Result<RunDirs> MakeRunDirs(const WorkerPlan& w) {
  RunDirs d;
  if (w.log_dir.empty()) {
    // Logs may grow: on /tmp's disk, not in memory (DefaultTempParent).
    Result<std::string> run = w.write_logs ? NewPrivateDir("/tmp") : NewPrivateDir();
    if (!run.ok()) return run.status();
    d.run = *run;
    d.run_is_fresh = true;
    d.private_is_run = !w.write_logs;
    if (d.private_is_run) {
      d.private_dir = d.run;
      return d;
    }
  } else {
    Result<std::string> run = RunDirUnderLogDir(w, true);
    if (!run.ok()) return run.status();
    d.run = *run;
  }
  Result<std::string> private_dir = NewPrivateDir();
  if (!private_dir.ok()) {
    if (d.run_is_fresh) fs::remove_all(d.run);
    return private_dir.status();
  }
  d.private_dir = *private_dir;
  return d;
}

RunPlan RunPlanFor(const Plan& p, const std::string& exe, const RunDirs& dirs) {
  const WorkerPlan& w = *p.workers();
  RunPlan plan;
  plan.layout.run_id = w.run_id;
  plan.layout.max_restarts = w.max_restarts;
  plan.layout.role = w.role;
  plan.layout.roles = w.roles;
  plan.layout.process_view = w.process_view;
  plan.flavors = w.flavors;
  if (w.flavors.azure) plan.flavors.azure_hostfile = dirs.private_dir + "/hostfile";
  plan.inherited = w.inherited;
  plan.exe = exe;
  plan.argv = w.argv;
  plan.local_rank_arg_at = w.local_rank_arg_at;
  plan.work_dir = dirs.run;
  plan.private_dir = dirs.private_dir;
  plan.write_logs = w.write_logs;
  plan.redirected = w.redirected;
  plan.console_ranks = w.console_ranks;
  plan.tag_format = w.tag_format;
  plan.cpus = CpuPlacement(w.bind_to, w.nproc);
  plan.gpus = w.gpus;
  plan.pin_gpu = w.pin_gpu;
  // In a rendezvous the coordinator drives restarts across nodes; locally each
  // generation runs once.
  bool agent = std::holds_alternative<AgentPlan>(p.run);
  plan.supervisor = SupervisorOptions{w.nproc, agent ? 0 : w.max_restarts, w.shutdown_timeout};
  if (!agent) {
    plan.supervisor.max_no_progress_restarts = w.recovery.max_no_progress_restarts;
    plan.supervisor.backoff_min = w.recovery.backoff_min;
    plan.supervisor.backoff_max = w.recovery.backoff_max;
  }
  if (w.hang_timeout.count() > 0) plan.supervisor.sample_before_kill = kSampleBeforeKill;
  plan.stop_signals = w.stop_signals;
  plan.slurm = SlurmScopeOf(w.inherited, ReadProctrackType(w.inherited));
  plan.hang_timeout = w.hang_timeout;
  plan.hang_stop = w.hang_stop;
  // The hook costs each Python process it runs in; a command that names no
  // Python (`true`, a native program) goes without it, and gdb reads it.
  plan.python_hook = w.python_hook && (CommandNamesPython(exe, w.argv) || ShebangNamesPython(ReadHead(exe)));
  // Each Python worker's hook samples where its main thread spends its time
  // (launcher/straggler/samples.hpp), for the straggler watch.
  bool sample = plan.python_hook && w.straggler.enabled();
  AddSampler(plan.inherited, sample ? kSamplePeriod : std::chrono::milliseconds(0), SampleFlush(w.straggler.window));
  return plan;
}

// The stack hook, when the workers get it: in this user's directory, kept
// across jobs (python_hook.hpp), else in the private one; its dumps go into
// the private one, which the job already has. Neither: the workers run without it.
void PreparePythonHook(RunPlan& plan, Console& console) {
  if (!plan.python_hook) return;
  std::string user_dir = LiveDir(plan.inherited, geteuid());
  Status s = OpenLiveDir(user_dir, geteuid());
  if (s.ok()) {
    plan.hook_dir = PythonHookDir(user_dir);
    s = WritePythonHook(plan.hook_dir);
  }
  if (!s.ok()) {
    plan.hook_dir = plan.private_dir + "/py";
    s = WritePythonHook(plan.hook_dir);
  }
  if (!s.ok()) {
    plan.python_hook = false;
    console.Say(fmt::format("{}; Python stacks will come from gdb", s.message()));
  }
}

// torch.distributed.launch's static multi-node form (and every single-node job):
// the layout comes from the flags alone. Every node is assumed to run as many
// workers as this one, as that launcher assumes.
int RunStatic(const StaticPlan& s, RunPlan& plan, RunEnv& env, EventLoop& loop, Console& console, RunLiveSource& live,
              NodeStraggler& straggler, const StragglerFlags& straggler_flags, const envmap::ProgramPlan& programs) {
  int n = plan.supervisor.nproc;
  envmap::JobLayout& layout = plan.layout;
  layout.node_rank = s.node_rank;
  layout.master_addr = s.master_addr;
  std::string host = HostName();
  for (int i = 0; i < s.nnodes; ++i) {
    bool self = i == s.node_rank;
    std::string addr = self     ? (s.local_addr.empty() ? (s.nnodes == 1 ? s.master_addr : host) : s.local_addr)
                       : i == 0 ? s.master_addr
                       : i < std::ssize(s.node_list) ? s.node_list[static_cast<size_t>(i)]
                                                     : fmt::format("node{}", i);
    layout.nodes.push_back(envmap::Node{self ? host : addr, addr, n, {}});
  }

  // Ports. MASTER_PORT stays bound (SO_REUSEADDR, not listening) for the whole
  // job: nothing else can be handed it, and torch's TCPStore, which sets
  // SO_REUSEADDR too, still binds it. TF task ports are let go just before the
  // workers start, since not every server sets SO_REUSEADDR.
  PortReservation master_hold;
  std::vector<PortReservation> task_holds;
  // --env horovod: node rank 0 serves the gloo store at MASTER_PORT + 1, so a
  // free MASTER_PORT is one whose next port is free too.
  const bool horovod_store = plan.flavors.horovod && !layout.process_view;
  PortReservation store_hold;
  if (s.master_port) {
    layout.master_port = *s.master_port;
    if (s.hosts_master) {
      Result<PortReservation> r =
          PortReservation::Exactly(layout.master_port, fmt::format("--master-port {}", layout.master_port));
      if (!r.ok()) return Fail(kExitUsage, r.status().message());
      master_hold = std::move(*r);
    }
  } else if (s.nnodes == 1) {
    Result<PortReservation> r =
        horovod_store ? PortReservation::AnyFreeWithNext(&store_hold) : PortReservation::AnyFreeForStore();
    if (!r.ok()) return Fail(1, r.status().message());
    layout.master_port = r->port();
    master_hold = std::move(*r);
  } else {
    layout.master_port = base::kDefaultMasterPort;
  }
  if (!layout.roles.empty()) {
    for (int i = 0; i < n; ++i) {
      Result<PortReservation> r = PortReservation::AnyFree();
      if (!r.ok()) return Fail(1, r.status().message());
      layout.nodes[static_cast<size_t>(s.node_rank)].task_ports.push_back(r->port());
      task_holds.push_back(std::move(*r));
    }
  }
  if (Status st = envmap::Validate(layout); !st.ok()) return Fail(kExitUsage, st.message());
  if (Status st = PreparePrograms(programs, plan, task_holds); !st.ok())
    return Fail(st.code() == Code::kNotFound ? kExitNotFound : kExitUsage, st.message());
  std::unique_ptr<HorovodServer> horovod;
  if (horovod_store) {
    plan.flavors.horovod_iface = InterfaceToward(layout.master_addr);
    if (s.node_rank == 0) {
      store_hold.Release();
      Result<std::unique_ptr<HorovodServer>> started =
          HorovodServer::Start(loop.io(), layout, s.nnodes == 1 || !s.node_list.empty(),
                               [&console](const std::string& line) { console.Say(line); });
      if (!started.ok()) return Fail(1, started.status().message());
      horovod = std::move(*started);
      plan.restarting = [h = horovod.get()](int) { h->Reset(); };  // each restart meets a clean store
    }
  }

  task_holds.clear();  // the TF tasks bind their ports now
  PrintNotices(plan, console);
  std::unique_ptr<WorkerRun> run =
      StartJob(plan, env, loop.io(), console, nullptr, [&loop](int code) { loop.Exit(code); });
  live.SetRun(run.get());
  std::unique_ptr<StragglerWatch> watch = LocalStragglerWatch(
      straggler_flags, env.timers(), *plan.events, console, straggler, [&run] { return run.get(); }, layout);
  straggler.SetWatch(watch.get());
  straggler.SetRun(run.get(), &layout);
  int code = loop.Run();
  straggler.SetRun(nullptr, nullptr);
  straggler.SetWatch(nullptr);
  watch.reset();
  live.SetRun(nullptr);
  plan.restarting = nullptr;  // the store goes with this frame
  return code;
}

}  // namespace

void SayTmpdirNote(const std::string& note) {
  // `dlaunch job` makes its hostfile and then the job's private directory:
  // the same TMPDIR, said once.
  static bool said = false;
  if (note.empty() || said) return;
  said = true;
  WriteAll(STDERR_FILENO, fmt::format("dlaunch: {}\n", note));
}

Status CheckRunFiles(const WorkerPlan& w) {
  if (!w.log_dir.empty()) {
    if (Result<std::string> run = RunDirUnderLogDir(w, false); !run.ok()) return run.status();
  }
  if (!w.events.empty()) return EventLog::Check(w.events);
  return Status::Ok();
}

namespace {

// Opens --events (if given) and says the job started. Fails, with nothing
// written, when the file cannot be opened.
Status StartEvents(const Plan& p, const RunPlan& plan, EventLog& events) {
  const WorkerPlan& w = *p.workers();
  if (!w.events.empty()) {
    if (Status s = events.Open(w.events); !s.ok()) return s;
  }
  events.SetRunId(w.run_id);
  if (const auto* node = std::get_if<NodePlan>(&p.run)) events.SetNodeRank(node->layout.node_rank);
  boost::json::array argv;
  for (const std::string& a : plan.argv) argv.emplace_back(a);
  events.Emit("job_started", {{"mode", ModeName(p.mode())},
                              {"nproc", w.nproc},
                              {"command", std::move(argv)},
                              {"pid", static_cast<int>(getpid())}});
  return Status::Ok();
}

}  // namespace

int RunLocal(const Plan& p, const std::string& exe) {
  const WorkerPlan& w = *p.workers();
  Result<RunDirs> dirs = MakeRunDirs(w);
  if (!dirs.ok()) return Fail(dirs.status().code() == Code::kInvalidArgument ? kExitUsage : 1, dirs.status().message());
  auto remove_dirs = [&dirs](bool keep_run) { dirs->Remove(keep_run); };
  RunPlan plan = RunPlanFor(p, exe, *dirs);
  EventLog events;
  if (Status s = StartEvents(p, plan, events); !s.ok()) {
    remove_dirs(false);
    return Fail(kExitUsage, s.message());
  }
  plan.events = &events;
  const std::string& run_id = w.run_id;
  const auto* node = std::get_if<NodePlan>(&p.run);

  // Supervision: a watchdog kills every worker group if we are killed outright,
  // and orphans of workers come to us, not to init. The watchdog starts first, so
  // that it is not adopted itself (Watchdog::Start).
  signal(SIGPIPE, SIG_IGN);
  Watchdog watchdog;
  Result<std::string> live_path = LiveSocketPath(w.inherited, run_id);
  // If dlaunch is killed the watchdog removes the private directory: that is
  // the whole run directory when it would go anyway (no logs), and never logs.
  if (Status s = watchdog.Start(dirs->private_dir, live_path.ok() ? *live_path : ""); !s.ok()) {
    remove_dirs(false);
    return Fail(1, s.message());
  }
  if (!watchdog.fallback_note().empty())
    WriteAll(STDERR_FILENO, fmt::format("dlaunch: {}\n", watchdog.fallback_note()));
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  EventLoop loop;
  Console console(loop.io(), STDOUT_FILENO, STDERR_FILENO);
  // Daemons that workers left behind (setsid, double fork) come to this subreaper:
  // the watchdog learns of them while the job runs, and they end with it.
  Adopted adopted(watchdog);
  adopted.Start(loop.io());
  PreparePythonHook(plan, console);
  RunLiveSource live(LiveJob{run_id, UtcNow(), plan.argv, w.nproc});
  SwitchLiveSource view(live);  // the whole job's once this process hosts the coordinator
  // Where each rank spends its time, for the straggler watch (straggler_glue.hpp),
  // whose findings the live view shows.
  AsioTimers straggler_timers(loop.io());
  NodeStraggler straggler(w.straggler, plan.private_dir, console, straggler_timers);
  StragglerLiveSource marked(view, [&straggler] { return straggler.watch(); });
  std::unique_ptr<LiveServer> live_server = StartLiveView(loop.io(), console, live_path, marked);
  // --metrics-addr: read from the live view's run, the events, and the hosted coordinator.
  LauncherMetrics metrics(ModeName(p.mode()), node != nullptr ? node->layout.nnodes * w.nproc : 0, live);
  events.Observe([&metrics](std::string_view event, const boost::json::object& f) { metrics.OnEvent(event, f); });
  Result<std::unique_ptr<MetricsService>> metrics_service = StartMetricsService(
      loop.io(), w.metrics_addr,
      {[&metrics](Exposition& e) { metrics.Write(e); }, [&metrics] { return metrics.Ready(); }},
      [&console](const std::string& line) { console.Say(line); }, &events);
  if (!metrics_service.ok()) {
    live_server.reset();
    adopted.KillAll();
    watchdog.Stop();
    remove_dirs(false);
    events.Observe(nullptr);
    return Fail(kExitUsage, metrics_service.status().message());
  }
  // What the workers' run does to the world, built once here (run_env.hpp).
  SystemRunEnv env(loop.io(), watchdog);
  // Each worker's DLAUNCH_PROGRESS_FILE, in the private directory: read by the
  // supervisor at each failure and, on a rendezvous node, for its heartbeats.
  ProgressFiles progress(plan.private_dir, plan.supervisor.nproc,
                         [&console](const std::string& line) { console.Say(line); });
  plan.progress = &progress;
  int code = node != nullptr
                 ? RunStatic(node->layout, plan, env, loop, console, live, straggler, w.straggler, w.programs)
                 : RunMultiNode(std::get<AgentPlan>(p.run).rendezvous, plan, env, loop, console, live, view, metrics,
                                straggler, w.straggler, w.programs);
  live_server.reset();  // the socket goes as the job ends
  adopted.KillAll();
  watchdog.Stop();
  // A hang's stacks (stacks-N.txt) keep the run directory, as logs do.
  bool stacks = fs::exists(plan.work_dir + "/stacks-1.txt");
  remove_dirs(plan.write_logs || stacks);
  if ((plan.write_logs || stacks) && dirs->run_is_fresh) {
    console.Say(fmt::format("{} in {}", plan.write_logs ? "logs are" : "stacks are", plan.work_dir));
  }
  events.Emit("job_finished", {{"exit_code", code}, {"root_cause", code == 0 ? "" : events.root_cause()}});
  events.Observe(nullptr);
  // No line lost: wait for a slow reader, but not past a stop signal.
  console.Drain(plan.stop_signals);
  return code;
}

}  // namespace dlaunch::launcher
