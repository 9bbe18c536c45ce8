#include "launcher/modes/local.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <boost/json/array.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include "launcher/core/event_loop.hpp"
#include "launcher/core/events.hpp"
#include "launcher/core/exit.hpp"
#include "launcher/core/system.hpp"
#include "launcher/modes/job_live.hpp"
#include "launcher/modes/multinode.hpp"
#include "launcher/process/adopted.hpp"
#include "launcher/process/live.hpp"
#include "launcher/process/process.hpp"
#include "launcher/process/runner.hpp"

namespace fs = std::filesystem;

namespace dlaunch::launcher {

namespace {

// torch.distributed.launch's default port for static multi-node jobs.
constexpr int kDefaultMasterPort = 29500;

// A writable, existing directory, or an error naming `flag` and the path.
Status EnsureDirectory(const std::string& flag, const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return Status::InvalidArgument(fmt::format("{} {}: cannot create ({})", flag, path, ec.message()));
  if (access(path.c_str(), W_OK) != 0)
    return Status::InvalidArgument(fmt::format("{} {}: not writable", flag, path));
  return Status::Ok();
}

// Where error files and logs go: --log-dir/RUN_ID, else a fresh directory under
// $TMPDIR when it is usable, else /tmp, as Python's tempfile (torchrun) does.
Result<std::string> MakeWorkDir(const WorkerPlan& w) {
  if (!w.log_dir.empty()) {
    if (Status s = EnsureDirectory("--log-dir", w.log_dir); !s.ok()) return s;
    return fmt::format("{}/{}", w.log_dir, w.run_id);
  }
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = tmpdir != nullptr && *tmpdir == '/' ? fmt::format("{}/dlaunch-XXXXXX", tmpdir) : "";
  if (!tmpl.empty() && mkdtemp(tmpl.data()) != nullptr) return tmpl;
  tmpl = "/tmp/dlaunch-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr)
    return Status::Io(fmt::format("/tmp: cannot create a run directory ({})", std::strerror(errno)));
  return tmpl;
}

RunPlan RunPlanFor(const Plan& p, const std::string& exe, const std::string& work_dir) {
  const WorkerPlan& w = p.workers;
  RunPlan plan;
  plan.layout.run_id = w.run_id;
  plan.layout.max_restarts = w.max_restarts;
  plan.layout.role = w.role;
  plan.layout.roles = w.roles;
  plan.layout.process_view = w.process_view;
  plan.flavors = w.flavors;
  if (w.flavors.azure) plan.flavors.azure_hostfile = work_dir + "/hostfile";
  plan.inherited = w.inherited;
  plan.exe = exe;
  plan.argv = w.argv;
  plan.local_rank_arg_at = w.local_rank_arg_at;
  plan.work_dir = work_dir;
  plan.write_logs = w.write_logs;
  plan.redirected = w.redirected;
  plan.console_ranks = w.console_ranks;
  plan.tag_format = w.tag_format;
  plan.cpus = CpuPlacement(w.bind_to, w.nproc);
  plan.gpus = w.gpus;
  plan.pin_gpu = w.pin_gpu;
  plan.supervisor = SupervisorOptions{w.nproc, w.max_restarts, w.shutdown_timeout};
  if (w.hang_timeout.count() > 0) plan.supervisor.sample_before_kill = kSampleBeforeKill;
  plan.stop_signals = w.stop_signals;
  plan.hang_timeout = w.hang_timeout;
  plan.hang_stop = w.hang_stop;
  plan.python_hook = w.python_hook;
  return plan;
}

// torch.distributed.launch's static multi-node form (and every single-node job):
// the layout comes from the flags alone. Every node is assumed to run as many
// workers as this one, as that launcher assumes.
int RunStatic(const StaticPlan& s, RunPlan& plan, Watchdog& watchdog, EventLoop& loop, Console& console,
              RunLiveSource& live) {
  int n = plan.supervisor.nproc;
  envmap::JobLayout& layout = plan.layout;
  layout.node_rank = s.node_rank;
  layout.master_addr = s.master_addr;
  std::string host = HostName();
  for (int i = 0; i < s.nnodes; ++i) {
    bool self = i == s.node_rank;
    std::string addr = self ? (s.local_addr.empty() ? (s.nnodes == 1 ? s.master_addr : host) : s.local_addr)
                            : (i == 0 ? s.master_addr : fmt::format("node{}", i));
    layout.nodes.push_back(envmap::Node{self ? host : addr, addr, n, {}});
  }

  // Ports. MASTER_PORT stays bound (SO_REUSEADDR, not listening) for the whole
  // job: nothing else can be handed it, and torch's TCPStore, which sets
  // SO_REUSEADDR too, still binds it. TF task ports are let go just before the
  // workers start, since not every server sets SO_REUSEADDR.
  PortReservation master_hold;
  std::vector<PortReservation> task_holds;
  if (s.master_port) {
    layout.master_port = *s.master_port;
    if (s.hosts_master) {
      Result<PortReservation> r = PortReservation::Exactly(layout.master_port, fmt::format("--master-port {}", layout.master_port));
      if (!r.ok()) return Fail(kExitUsage, r.status().message());
      master_hold = std::move(*r);
    }
  } else if (s.nnodes == 1) {
    Result<PortReservation> r = PortReservation::AnyFree();
    if (!r.ok()) return Fail(1, r.status().message());
    layout.master_port = r->port();
    master_hold = std::move(*r);
  } else {
    layout.master_port = kDefaultMasterPort;
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

  task_holds.clear();  // the TF tasks bind their ports now
  PrintNotices(plan, console);
  std::unique_ptr<WorkerRun> run =
      StartJob(plan, watchdog, loop.io(), console, nullptr, [&loop](int code) { loop.Exit(code); });
  live.SetRun(run.get());
  int code = loop.Run();
  live.SetRun(nullptr);
  return code;
}

}  // namespace

int RunLocal(const Plan& p) {
  Result<std::string> exe = ResolveCommand(p.workers.argv.at(0));
  if (!exe.ok())
    return Fail(exe.status().code() == Code::kNotFound ? kExitNotFound : kExitNotExecutable, exe.status().message());
  Result<std::string> work_dir = MakeWorkDir(p.workers);
  if (!work_dir.ok()) return Fail(work_dir.status().code() == Code::kInvalidArgument ? kExitUsage : 1,
                                  work_dir.status().message());
  RunPlan plan = RunPlanFor(p, *exe, *work_dir);
  EventLog events;
  if (!p.workers.events.empty()) {
    if (Status s = events.Open(p.workers.events); !s.ok()) {
      std::error_code ec;
      fs::remove_all(plan.work_dir, ec);
      return Fail(kExitUsage, s.message());
    }
  }
  plan.events = &events;
  const std::string& run_id = p.mode == Mode::kRendezvous ? p.rendezvous.coordinator.run_id : plan.layout.run_id;
  events.SetRunId(run_id);
  if (p.mode != Mode::kRendezvous) events.SetNodeRank(p.layout.node_rank);
  boost::json::array argv;
  for (const std::string& a : plan.argv) argv.emplace_back(a);
  events.Emit("job_started", {{"mode", ModeName(p.mode)},
                              {"nproc", p.workers.nproc},
                              {"command", std::move(argv)},
                              {"pid", static_cast<int>(getpid())}});

  // Supervision: a watchdog kills every worker group if we are killed outright,
  // and orphans of workers come to us, not to init. The watchdog starts first, so
  // that it is not adopted itself (Watchdog::Start).
  signal(SIGPIPE, SIG_IGN);
  Watchdog watchdog;
  Result<std::string> live_path = LiveSocketPath(p.workers.inherited, run_id);
  if (Status s = watchdog.Start(plan.write_logs ? "" : plan.work_dir, live_path.ok() ? *live_path : "");
      !s.ok())
    return Fail(1, s.message());
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  EventLoop loop;
  Console console(loop.io(), STDOUT_FILENO, STDERR_FILENO);
  // Daemons that workers left behind (setsid, double fork) come to this subreaper:
  // the watchdog learns of them while the job runs, and they end with it.
  Adopted adopted(watchdog);
  adopted.Start(loop.io());
  RunLiveSource live(LiveJob{run_id, UtcNow(), plan.argv, p.workers.nproc});
  SwitchLiveSource view(live);  // the whole job's once this process hosts the coordinator
  std::unique_ptr<LiveServer> live_server = StartLiveView(loop.io(), console, live_path, view);
  int code = p.mode == Mode::kRendezvous ? RunMultiNode(p.rendezvous, plan, watchdog, loop, console, live, view)
                                         : RunStatic(p.layout, plan, watchdog, loop, console, live);
  live_server.reset();  // the socket goes as the job ends
  adopted.KillAll();
  watchdog.Stop();
  // A hang's stacks (stacks-N.txt) keep the run directory, as logs do.
  bool stacks = fs::exists(plan.work_dir + "/stacks-1.txt");
  if (!plan.write_logs && !stacks) {
    std::error_code ec;
    fs::remove_all(plan.work_dir, ec);
  } else if (p.workers.log_dir.empty()) {
    console.Say(fmt::format("{} in {}", plan.write_logs ? "logs are" : "stacks are", plan.work_dir));
  }
  events.Emit("job_finished", {{"exit_code", code}, {"root_cause", code == 0 ? "" : events.root_cause()}});
  // No line lost: wait for a slow reader, but not past a stop signal.
  console.Drain(plan.stop_signals);
  return code;
}

}  // namespace dlaunch::launcher
