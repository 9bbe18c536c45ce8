#include "launcher/modes/multinode.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <memory>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include "launcher/core/event_loop.hpp"
#include "launcher/core/exit.hpp"
#include "launcher/core/timers.hpp"
#include "launcher/core/system.hpp"
#include "launcher/core/text.hpp"
#include "launcher/health/health_gate.hpp"
#include "launcher/modes/programs_glue.hpp"
#include "launcher/modes/straggler_glue.hpp"
#include "rendezvous/agent_session.hpp"
#include "launcher/jobwide/horovod_server.hpp"
#include "launcher/jobwide/job_events.hpp"
#include "launcher/jobwide/job_hang.hpp"
#include "launcher/live/job_live.hpp"
#include "launcher/modes/loopback_token.hpp"
#include "launcher/process/slurm_signals.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/coordinator.hpp"
#include "rendezvous/server.hpp"

namespace dlaunch::launcher {

namespace asio = boost::asio;
namespace rdzv = dlaunch::rendezvous;

namespace {

// How long the host keeps serving after its own exit barrier, so the other
// agents receive their last message.
constexpr std::chrono::seconds kHostDrain{2};
// How often the host looks whether every agent has hung up. The server has no
// event for it; the host's own exit ends the job's wall time, so this is what
// the last agent to leave may wait (50 ms was a tenth of a 64-agent job).
constexpr std::chrono::milliseconds kHostDrainPoll{5};

// True when `host` names an address of this machine: binding to it succeeds.
bool IsLocalAddress(asio::io_context& io, const std::string& host) {
  boost::system::error_code ec;
  asio::ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(host, "0", ec);
  if (ec) return false;
  for (const auto& entry : results) {
    asio::ip::tcp::socket probe(io);
    probe.open(entry.endpoint().protocol(), ec);
    if (ec) continue;
    probe.bind(entry.endpoint(), ec);
    if (!ec) return true;
  }
  return false;
}

}  // namespace

namespace {

// This node's part of a rendezvous job on the event loop: the agent joins, each
// assignment becomes a run of the workers, and the agent's verdict ends the loop.
// A node that hosts the coordinator keeps serving briefly after its own verdict,
// so the other agents get their last message.
class NodeMode {
 public:
  ~NodeMode() {
    straggler_.SetWatch(nullptr);
    straggler_.SetRun(nullptr, nullptr);
  }
  NodeMode(EventLoop& loop, Console& console, const std::string& endpoint, const RunPlan& plan, RunEnv& env,
           std::unique_ptr<rdzv::CoordinatorServer> server, rdzv::HostPort target, rdzv::AgentMachineOptions aopts,
           std::vector<PortReservation> task_holds, PortReservation store_hold, RunLiveSource& live,
           SwitchLiveSource& view, LauncherMetrics& metrics, const HealthCheckPlan& health, NodeStraggler& straggler,
           const StragglerFlags& straggler_flags, const envmap::ProgramPlan& programs)
      : loop_(loop),
        console_(console),
        endpoint_(endpoint),
        base_(plan),
        env_(env),
        server_(std::move(server)),
        drain_(env.timers().NewTimer()),
        target_(std::move(target)),
        aopts_(WithSilence(std::move(aopts))),
        task_holds_(std::move(task_holds)),
        programs_(programs),
        store_hold_(std::move(store_hold)),
        live_(live),
        straggler_(straggler),
        hang_([this](const std::string& line) { console_.Say(line); }, plan.events,
              [this] { return Result<std::string>(base_.work_dir); }) {
    // The host's socket shows the whole job: every node, asked through the coordinator.
    if (server_) {
      job_live_ = std::make_unique<JobLiveSource>(*server_, LiveJob{plan.layout.run_id, UtcNow(), plan.argv, 0});
      view.SetJob(job_live_.get());
      metrics.SetCoordinator(server_.get());
      // The host compares every node's ranks (launcher/modes/straggler_glue.hpp).
      straggler_watch_ =
          JobStragglerWatch(straggler_flags, env.timers(), *plan.events, console, *server_, plan.layout.run_id);
      straggler_.SetWatch(straggler_watch_.get());
    }
    if (health.enabled()) MakeGate(health);
  }

  void Start() {
    if (server_) {
      WriteJobEvents(*server_, *base_.events);
      server_->OnHang({[this](const std::string&, const rdzv::HangSuspected& s) { hang_.Suspected(s); },
                       [this](const std::string&, const rdzv::HangReport& r) { hang_.Report(r); }});
    }
    if (!gate_) return Join(std::nullopt);
    Admit(env_.timers().Now() + aopts_.join_timeout);
  }

 private:
  // This node's agent joins the job: its join timeout is what is left until
  // `deadline` (the health gate may have held it out), else the whole of it.
  void Join(std::optional<SteadyTime> deadline) {
    rdzv::AgentMachineOptions o = aopts_;
    if (deadline)
      o.join_timeout = std::max(std::chrono::milliseconds(1),
                                std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - env_.timers().Now()));
    agent_ = std::make_unique<rdzv::AgentSession>(
        loop_.io(), target_, std::move(o),
        rdzv::AgentSession::Hooks{[this](const rdzv::Assignment& a) { Run(a); },
                                  [this](int code, const std::string& error) { Finish(code, error); },
                                  [this](const std::string& line) { console_.Say(line); },
                                  [this](int id, const std::string& what) { Query(id, what); }});
    agent_->Start();
    KeepFresh();
  }

  // --health-check: while the agent waits joined with no workers (a spare, or
  // standing by after a lost node: no run of an assignment is under way), the
  // check runs every interval; one that fails takes this node out of the job.
  void KeepFresh() {
    if (!gate_ || !agent_ || agent_->state() == rdzv::AgentMachine::State::kEnded) return;
    gate_->KeepFresh([this] { return agent_ && !pending_ && agent_->state() == rdzv::AgentMachine::State::kJoining; },
                     [this] { LeaveAndHoldOut(); });
  }

  // The check failed while joined: this node says Leave, so the coordinator
  // logs that it left, and is held out until a check passes.
  void LeaveAndHoldOut() {
    pending_.reset();
    agent_->Leave();
    agent_.reset();
    Admit(env_.timers().Now() + aopts_.join_timeout);
  }

  // --health-check (launcher/health/health_gate.hpp): the check runs with the
  // launcher's environment and the endpoint it is to reach.
  void MakeGate(const HealthCheckPlan& health) {
    HealthCheckSpec spec{health.command, health.timeout, kCheckKillGrace, {}};
    for (const auto& [name, value] : base_.inherited) spec.env.push_back(name + "=" + value);
    spec.env.push_back("DLAUNCH_RDZV_ENDPOINT=" + endpoint_);
    checker_ = std::make_unique<ProcessHealthChecker>(loop_.io(), env_.timers(), std::move(spec));
    gate_ = std::make_unique<HealthGate>(
        env_.timers(), env_.signals(), *checker_,
        HealthGateOptions{health.command, health.interval, base_.stop_signals}, base_.events,
        HealthGate::Hooks{
            [this](const std::string& line) { console_.Say(line); },
            [this](int sig) {
              Finish(128 + sig, fmt::format("health check: stopped by {} {}", SignalName(sig),
                                            agent_ ? "while this node waited in the job" : "before this node joined"));
            }});
  }

  // Joins once the check passes, or ends at `deadline` while it fails.
  void Admit(SteadyTime deadline) {
    gate_->Admit(
        deadline, [this, deadline] { Join(deadline); }, [this](const std::string& line) { KeptOut(line); });
  }

  // The gate held this node out for its whole join timeout. A node that hosts
  // the coordinator serves the job of the other nodes to its end first, or
  // until none of them is connected for a heartbeat timeout.
  void KeptOut(const std::string& line) {
    if (!server_ || server_->ended() || server_->jobs() == 0) {
      if (kept_out_) base_.events->SetRootCause(line);  // said already
      return Finish(1, kept_out_ ? "" : line);
    }
    if (!kept_out_) {
      console_.Say(line + "; this node serves the job's coordinator until the job ends");
      server_->ExpireAbandonedJobs(aopts_.heartbeat_timeout);
    }
    kept_out_ = true;
    drain_->At(env_.timers().Now() + std::chrono::seconds(1), [this, line] { KeptOut(line); });
  }

  // Before a restart (a newer generation), a check older than the interval
  // runs again first; one that fails takes this node out of the job.
  void RecheckThenRun(const rdzv::Assignment& a) {
    pending_ = a;
    // The job may stop or restart again meanwhile: the check goes, and the
    // agent hears that this node's (unstarted) workers are done.
    agent_->Attach([this](int code, const std::string&) {
      gate_->Stop();
      asio::post(loop_.io(), [this, code, alive = life_.token()] {
        if (alive.expired() || !agent_) return;
        pending_.reset();
        agent_->WorkersDone(code);
        KeepFresh();  // Stop ended the watch; a standby waits on
      });
    });
    gate_->Recheck([this](bool ok) {
      if (ok) return Run(*std::exchange(pending_, std::nullopt), /*checked=*/true);
      LeaveAndHoldOut();
    });
  }

  // Every heartbeat says how long this node's ranks have been silent.
  rdzv::AgentMachineOptions WithSilence(rdzv::AgentMachineOptions o) {
    // And each local rank's progress (its DLAUNCH_PROGRESS_FILE), read as it goes out.
    o.progress = [this] { return base_.progress && run_ ? base_.progress->Read() : std::vector<std::int64_t>{}; };
    o.silence = [this] {
      if (!run_) return std::chrono::milliseconds(0);
      return std::chrono::duration_cast<std::chrono::milliseconds>(env_.timers().Now() - run_->last_output());
    };
    return o;
  }

  // The coordinator asks about this node's workers: "stacks" (a hang) or
  // "status" (a row per rank). No run, or another question: no items.
  void Query(int id, const std::string& what) {
    if (run_ && what == "stacks") {
      run_->Stacks([this, id, alive = life_.token()](std::vector<RankStack> stacks) {
        if (!alive.expired() && agent_) agent_->Answer(id, StackItems(stacks));
      });
      return;
    }
    // "signal SIGUSR1": a head passes on a signal it caught (PassOnQuery).
    if (std::optional<int> sig = PassedOnSignal(what)) {
      if (run_) run_->PassOn(*sig);
      agent_->Answer(id, {});
      return;
    }
    // "profile": this node's ranks' windows, for the host's straggler watch.
    if (run_ && what == kProfileQuery) return agent_->Answer(id, straggler_.Items(*run_, generation_->layout));
    std::vector<std::string> items;
    if (run_ && what == "status")
      for (const boost::json::value& row : run_->Rows()) items.push_back(boost::json::serialize(row));
    agent_->Answer(id, std::move(items));
  }

  void Run(const rdzv::Assignment& a, bool checked = false) {
    live_.SetRun(nullptr);
    straggler_.SetRun(nullptr, nullptr);
    run_.reset();  // the last generation's run has finished
    if (gate_ && !checked && gate_->Due()) return RecheckThenRun(a);
    // Each generation runs a plan of its own: the base with the coordinator's layout.
    auto generation = std::make_unique<RunPlan>(base_);
    envmap::JobLayout& layout = generation->layout;
    if (static_cast<int>(a.nodes.size()) == a.nnodes) {
      layout.nodes = a.nodes;
    } else {
      Result<std::vector<envmap::Node>> table =
          a.nodes.size() == 1
              ? envmap::PartialTable(a.nnodes, a.node_rank, a.nodes.front(), a.rank_offset, a.world_size)
              : Result<std::vector<envmap::Node>>(Status::InvalidArgument(
                    fmt::format("assignment: {} rows for a job of {} nodes", a.nodes.size(), a.nnodes)));
      if (!table.ok()) return Finish(1, fmt::format("{}: bad assignment ({})", endpoint_, table.status().message()));
      layout.nodes = std::move(*table);
    }
    layout.node_rank = a.node_rank;
    layout.master_addr = a.master_addr;
    layout.master_port = a.master_port;
    layout.run_id = a.run_id;
    layout.restart_count = a.restart_count;
    if (Status s = envmap::Validate(layout); !s.ok())
      return Finish(1, fmt::format("{}: bad assignment ({})", endpoint_, s.message()));
    base_.events->SetNodeRank(a.node_rank);
    base_.events->Emit("rendezvous", {{"generation", a.generation},
                                      {"restart", a.restart_count},
                                      {"nodes", a.nnodes},
                                      {"world_size", a.world_size},
                                      {"master", fmt::format("{}:{}", a.master_addr, a.master_port)}});
    // Several programs: which group each rank of this generation is.
    std::vector<PortReservation> world_holds;
    if (Status s = PreparePrograms(programs_, *generation, world_holds); !s.ok())
      return Finish(s.code() == Code::kNotFound ? kExitNotFound : kExitUsage, s.message());
    task_holds_.clear();  // the TF tasks bind their ports now
    if (Status s = ServeHorovod(*generation); !s.ok()) return Finish(1, s.message());
    generation_ = std::move(generation);
    run_ =
        StartJob(*generation_, env_, loop_.io(), console_, &channel_, [this](int code) { agent_->WorkersDone(code); });
    live_.SetRun(run_.get());
    straggler_.SetRun(run_.get(), &generation_->layout);
    if (straggler_watch_) straggler_watch_->NewGeneration();
  }

  // --env horovod: each generation meets a store of its own, on this node when
  // it is node rank 0 (the last generation's store goes first: its port is
  // the same when this node stays node rank 0).
  Status ServeHorovod(RunPlan& generation) {
    if (!generation.flavors.horovod || generation.layout.process_view) return Status::Ok();
    generation.flavors.horovod_iface = InterfaceToward(generation.layout.master_addr);
    horovod_.reset();
    if (generation.layout.node_rank != 0) return Status::Ok();
    store_hold_.Release();
    Result<std::unique_ptr<HorovodServer>> started = HorovodServer::Start(
        loop_.io(), generation.layout, /*nodes_known=*/true, [this](const std::string& line) { console_.Say(line); });
    if (!started.ok()) return started.status();
    horovod_ = std::move(*started);
    return Status::Ok();
  }

  void Finish(int code, const std::string& error) {
    if (gate_) gate_->Stop();  // no check, and no leave, after the end
    // On the host, the coordinator's end of the job is the agent's error too:
    // DrainHost says it once, as the job's summary.
    bool host_says = server_ && server_->ended() && server_->ended()->summary == error;
    if (!error.empty() && !host_says) console_.Say(error);
    if (!error.empty()) base_.events->SetRootCause(error);
    code_ = code;
    if (!server_) return loop_.Exit(code);
    // Serve until the coordinator has ended the job and told every agent.
    drain_deadline_ = env_.timers().Now() + kHostDrain;
    DrainHost();
  }

  void DrainHost() {
    if (server_->Flushed() || env_.timers().Now() >= drain_deadline_) {
      if (server_->ended() && server_->ended()->exit_code != 0) {
        // A job stopped on a hang shows its summary under the cause, as a single node does.
        std::vector<std::string> lines = hang_.StopLines(server_->ended()->summary);
        if (lines.empty()) lines.push_back("job: " + server_->ended()->summary);
        for (const std::string& line : lines) console_.Say(line);
      } else if (server_->ended()) {
        console_.Say(server_->ended()->summary);  // "job 'x' finished on N nodes"
      }
      return loop_.Exit(code_);
    }
    drain_->At(env_.timers().Now() + kHostDrainPoll, [this] { DrainHost(); });
  }

  EventLoop& loop_;
  Console& console_;
  std::string endpoint_;
  const RunPlan& base_;
  std::unique_ptr<RunPlan> generation_;  // the plan run_ runs: outlives it
  RunEnv& env_;
  std::unique_ptr<rdzv::CoordinatorServer> server_;
  std::unique_ptr<JobLiveSource> job_live_;  // with server_: the live view of the whole job
  std::unique_ptr<Timer> drain_;             // from env_: dropped with this mode
  SteadyTime drain_deadline_;
  int code_ = 1;
  rdzv::HostPort target_;
  rdzv::AgentMachineOptions aopts_;
  // From Join on; gone while the health gate holds this node out.
  std::unique_ptr<rdzv::AgentSession> agent_;
  // --health-check: the check and the gate; null without it.
  std::unique_ptr<ProcessHealthChecker> checker_;
  std::unique_ptr<HealthGate> gate_;
  std::optional<rdzv::Assignment> pending_;  // a restart's assignment while its check runs
  bool kept_out_ = false;                    // KeptOut said its line
  // The runner's side of the session.
  struct Channel : JobChannel {
    explicit Channel(std::unique_ptr<rdzv::AgentSession>& s) : session(s) {}
    void Attach(std::function<void(int, const std::string&)> abort) override { session->Attach(std::move(abort)); }
    void LocalFailure(int rank, int code, const std::string& reason) override {
      session->LocalFailure(rank, code, reason);
    }
    std::unique_ptr<rdzv::AgentSession>& session;
  } channel_{agent_};
  std::unique_ptr<WorkerRun> run_;
  std::vector<PortReservation> task_holds_;  // this node's TF task ports, until its tasks start
  const envmap::ProgramPlan& programs_;      // several programs: empty, or the groups each generation numbers
  PortReservation store_hold_;               // MASTER_PORT + 1 (--env horovod), until this node serves the store
  std::unique_ptr<HorovodServer> horovod_;   // node rank 0's store for the current generation
  RunLiveSource& live_;
  NodeStraggler& straggler_;                         // this node's ranks' windows
  std::unique_ptr<StragglerWatch> straggler_watch_;  // with server_: compares every node's ranks
  JobHangReporter hang_;                             // the hosted coordinator's hang reports
  Lifetime life_;                                    // last: expires first
};

}  // namespace

namespace {

// The rendezvous secret and, for messages, where it came from: the plan's, else
// on loopback this user's own (every local user reaches loopback), else none.
struct AgentToken {
  std::string token;
  std::string from;
};

Result<AgentToken> TokenFor(asio::io_context& io, const RendezvousPlan& r, Console& console) {
  const rdzv::HostPort& endpoint = *r.endpoint;
  if (!r.token.empty()) return AgentToken{r.token, ""};
  if (IsLoopbackHost(io, endpoint.host)) {
    Result<std::string> own = OwnLoopbackToken("rendezvous " + endpoint.ToString());
    if (!own.ok()) return own.status();
    return AgentToken{*own,
                      fmt::format("its user's loopback token ({}/{})", LoopbackTokenDir(getuid()), kLoopbackTokenFile)};
  }
  console.Say(fmt::format("rendezvous {}: no token, so anyone who reaches it can join (set {} or --rdzv-token-file)",
                          endpoint.ToString(), rdzv::kTokenEnvVar));
  return AgentToken{};
}

// Hosts the coordinator when the endpoint is ours. With several agents on one
// machine (loopback tests) each would qualify; the first to bind hosts it, and
// the others get null, and why in *not_hosting. Fails only where this node must
// host (is_host=1).
Result<std::unique_ptr<rdzv::CoordinatorServer>> HostIfOurs(asio::io_context& io, const RendezvousPlan& r,
                                                            const std::string& token, Console& console,
                                                            std::string* not_hosting) {
  std::unique_ptr<rdzv::CoordinatorServer> none;
  if (!r.is_host.value_or(IsLocalAddress(io, r.endpoint->host))) return none;
  rdzv::CoordinatorOptions copts = r.coordinator;
  copts.endpoint = r.endpoint->ToString();
  copts.token = token;
  if (Status s = rdzv::Validate(copts); !s.ok()) return s;
  auto started =
      rdzv::CoordinatorServer::Start(io, *r.endpoint, "--rdzv-endpoint", rdzv::CoordinatorServer::OneJob(copts),
                                     [&console](const std::string& line) { console.Say(line); });
  if (started.ok()) {
    (*started)->LogJobEnds(false);  // NodeMode says the job's end as its summary
    return std::move(*started);
  }
  if (r.is_host.value_or(false)) return started.status();
  *not_hosting = started.status().message();
  return none;
}

// What this node's agent says when it joins, and the ports it holds for that:
// MASTER_PORT in case it becomes rank 0, and a port per TF task, which every
// node's TF_CONFIG lists.
struct Join {
  rdzv::AgentMachineOptions options;
  PortReservation master_hold;
  PortReservation store_hold;  // --env horovod: master_hold's port + 1, for the store if this node is rank 0
  std::vector<PortReservation> task_holds;
};

Result<Join> JoinFor(const RendezvousPlan& r, const RunPlan& plan, AgentToken token, bool hosting) {
  Join out;
  const bool horovod_store = plan.flavors.horovod && !plan.layout.process_view;
  Result<PortReservation> master_hold = r.master_port   ? Result<PortReservation>(PortReservation())
                                        : horovod_store ? PortReservation::AnyFreeWithNext(&out.store_hold)
                                                        : PortReservation::AnyFreeForStore();
  if (!master_hold.ok()) return master_hold.status();
  out.master_hold = std::move(*master_hold);
  rdzv::AgentMachineOptions& o = out.options;
  o.endpoint = r.endpoint->ToString();
  o.token = std::move(token.token);
  o.token_from = std::move(token.from);
  o.join.run_id = r.coordinator.run_id;
  o.min_nodes = r.min_nodes;
  o.max_nodes = r.max_nodes;
  o.max_restarts = r.coordinator.max_restarts;
  o.spares = r.coordinator.spares;
  o.max_no_progress_restarts = r.coordinator.max_no_progress_restarts;
  o.backoff_min = r.coordinator.backoff_min;
  o.backoff_max = r.coordinator.backoff_max;
  o.join.host = r.host_name;
  if (!r.local_addr.empty()) o.join.addrs.push_back(r.local_addr);
  o.join.nproc = plan.supervisor.nproc;
  o.join.gpus = static_cast<int>(plan.gpus.size());
  o.join.requested_node_rank = r.requested_node_rank;
  o.join.master_port_hint = out.master_hold.port();
  // Only TF_CONFIG, Azure ML's hostfile and Horovod's store (its scopes, its
  // peers, and HOROVOD_HOSTNAME, which must tell nodes of one hostname apart)
  // need the other nodes; without them the coordinator sends this node's row alone.
  o.join.wants_table = plan.flavors.azure || !plan.layout.roles.empty() || horovod_store ? 1 : 0;
  if (!plan.layout.roles.empty()) {
    for (int i = 0; i < plan.supervisor.nproc; ++i) {
      Result<PortReservation> port = PortReservation::AnyFree();
      if (!port.ok()) return port.status();
      o.join.task_ports.push_back(port->port());
      out.task_holds.push_back(std::move(*port));
    }
  }
  o.join_timeout = r.join_timeout;
  o.heartbeat_timeout = r.heartbeat_timeout;
  o.heartbeat_interval = r.heartbeat_timeout / 3;
  o.hosted = hosting;
  o.hang_timeout = plan.hang_timeout;
  o.hang_stop = plan.hang_stop;
  return out;
}

}  // namespace

int RunMultiNode(const RendezvousPlan& r, const RunPlan& plan, RunEnv& env, EventLoop& loop, Console& console,
                 RunLiveSource& live, SwitchLiveSource& view, LauncherMetrics& metrics, NodeStraggler& straggler,
                 const StragglerFlags& straggler_flags, const envmap::ProgramPlan& programs) {
  auto Fail = [&console](int code, const std::string& message) {
    console.Say(message);
    return code;
  };
  Result<AgentToken> token = TokenFor(loop.io(), r, console);
  if (!token.ok()) return Fail(kExitUsage, token.status().message());
  std::string not_hosting;
  Result<std::unique_ptr<rdzv::CoordinatorServer>> server =
      HostIfOurs(loop.io(), r, token->token, console, &not_hosting);
  if (!server.ok()) return Fail(kExitUsage, server.status().message());
  Result<Join> join = JoinFor(r, plan, std::move(*token), *server != nullptr);
  if (!join.ok()) return Fail(1, join.status().message());
  join->options.not_hosting = std::move(not_hosting);

  PrintNotices(plan, console);
  NodeMode mode(loop, console, r.endpoint->ToString(), plan, env, std::move(*server), *r.endpoint,
                std::move(join->options), std::move(join->task_holds), std::move(join->store_hold), live, view, metrics,
                r.health, straggler, straggler_flags, programs);
  mode.Start();
  int code = loop.Run();
  live.SetRun(nullptr);  // the run, the job view and the coordinator go with `mode`
  view.SetJob(nullptr);
  metrics.SetCoordinator(nullptr);
  return code;
}

}  // namespace dlaunch::launcher
