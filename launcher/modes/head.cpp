#include "launcher/modes/head.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/write.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/core/event_loop.hpp"
#include "launcher/core/events.hpp"
#include "launcher/core/exit.hpp"
#include "launcher/core/loopback.hpp"
#include "launcher/core/output.hpp"
#include "launcher/core/system.hpp"
#include "launcher/core/text.hpp"
#include "launcher/jobwide/job_hang.hpp"
#include "launcher/jobwide/job_live.hpp"
#include "launcher/process/process.hpp"
#include "launcher/process/streams.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/server.hpp"

namespace dlaunch::launcher {
namespace {

namespace asio = boost::asio;
namespace rdzv = dlaunch::rendezvous;
using Clock = std::chrono::steady_clock;

// Default: how long an agent may take past --shutdown-timeout to finish once the
// job has ended, before its connection is killed.
constexpr std::chrono::seconds kFinishSlack{10};
// Default: bytes per read of one agent pipe.
constexpr size_t kReadSize = size_t{1} << 16;

std::string Hex(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
  return out;
}

// This machine's address on the route to `host`. Connecting a UDP socket sends
// nothing; the kernel only picks the source address it would use.
Result<std::string> RouteAddress(asio::io_context& io, const std::string& host) {
  boost::system::error_code ec;
  asio::ip::udp::resolver resolver(io);
  auto results = resolver.resolve(host, "9", ec);
  if (ec || results.empty())
    return Status::InvalidArgument(fmt::format("node {}: cannot resolve ({})", host, ec ? ec.message() : "no address"));
  asio::ip::udp::socket probe(io);
  probe.connect(results.begin()->endpoint(), ec);
  if (!ec) {
    auto local = probe.local_endpoint(ec);
    if (!ec) return local.address().to_string();
  }
  return Status::InvalidArgument(fmt::format("node {}: no route from this machine ({})", host, ec.message()));
}

// The agents of a head-node launch, run to the end on one io_context.
class Head {
 public:
  struct Node {
    std::string name;      // "node 1 (10.0.0.3)"
    std::string launcher;  // "ssh", "pdsh" or "sh"
    int pid = -1;
    std::optional<int> code;  // shell exit code, once reaped
    bool finished = false;
    std::unique_ptr<TailBuffer> err_tail = std::make_unique<TailBuffer>(4096);  // stays put as nodes_ grows
  };

  Head(const HeadPlan& plan, asio::io_context& io, Console& console, Watchdog& watchdog, rdzv::CoordinatorServer& server,
       const JobHangReporter& hang)
      : plan_(plan),
        io_(io),
        console_(console),
        watchdog_(watchdog),
        server_(server),
        hang_(hang),
        signals_(io),
        deadline_(io),
        streams_(io, console, kReadSize),
        reaper_(io, [this](int pid, int status) { Reaped(pid, status); }, nullptr) {}

  // Starts node `i`'s launcher; `stdin_data` is written to its stdin, which then closes.
  Status StartNode(const std::string& name, const std::string& launcher, const SpawnSpec& base,
                   const std::string& stdin_data);
  // Ends the job on every node (the first call only): each agent gets Abort{cause, code}.
  void Stop(int code, const std::string& cause);
  // Watches the nodes until every agent has finished; then calls `done` with the
  // job's exit code (128+N after a signal, 1 when the job never ended).
  void Run(std::function<void(int)> done);

 private:
  void WaitSignals();
  void Reaped(int pid, int status);
  void MaybeFinished(size_t i);
  void ArmDeadline();
  void WaitDeadline(Clock::duration after);
  void KillAll();
  bool AllFinished() const;
  void Complete();

  const HeadPlan& plan_;
  asio::io_context& io_;
  Console& console_;
  Watchdog& watchdog_;
  rdzv::CoordinatorServer& server_;
  const JobHangReporter& hang_;
  asio::signal_set signals_;  // stop signals
  asio::steady_timer deadline_;
  bool deadline_armed_ = false;
  bool completed_ = false;
  std::function<void(int)> done_;
  Lifetime life_;  // last: expires first
  std::vector<Node> nodes_;
  Streams streams_;  // group i: node i's
  Reaper reaper_;
  bool stopping_ = false;
  int stop_signal_ = 0;
};

Status Head::StartNode(const std::string& name, const std::string& launcher, const SpawnSpec& base,
                       const std::string& stdin_data) {
  Result<PipedChild> child = SpawnPiped(base, true);
  if (!child.ok()) return child.status();
  // The token and the -x values may pass the pipe's size, and ssh reads them
  // only once it has connected: written from the loop, and the pipe closes
  // once they are (or the node is gone).
  struct Feed {
    asio::posix::stream_descriptor pipe;
    std::string data;
  };
  auto feed = std::make_shared<Feed>(Feed{asio::posix::stream_descriptor(io_, child->stdin_fd), stdin_data});
  asio::async_write(feed->pipe, asio::buffer(feed->data), [feed](boost::system::error_code, size_t) {});
  watchdog_.Add(child->pid);
  size_t i = nodes_.size();
  Node& node = nodes_.emplace_back();
  node.name = name;
  node.launcher = launcher;
  node.pid = child->pid;
  for (auto [fd, is_err] : {std::pair{child->stdout_fd, false}, std::pair{child->stderr_fd, true}}) {
    // The agents tag their workers' lines; the head only keeps lines whole, so
    // two nodes' output never interleaves mid-line.
    StreamRoute r;
    r.console = is_err ? ConsoleStream::kErr : ConsoleStream::kOut;
    if (is_err) r.tail = node.err_tail.get();
    streams_.Add(fd, static_cast<int>(i), std::move(r), [this, i] { MaybeFinished(i); });
  }
  return Status::Ok();
}

void Head::WaitSignals() {
  signals_.async_wait([this, alive = life_.token()](boost::system::error_code ec, int sig) {
    if (ec || alive.expired()) return;
    if (stop_signal_ == 0) {
      stop_signal_ = sig;
      // A stalled reader must not hold up the teardown the user asked for.
      console_.NoteStop();
      Stop(128 + sig, fmt::format("stopped by {} on the head", SignalName(sig)));
    } else {
      // A second signal: do not wait for the agents.
      KillAll();
    }
    WaitSignals();
  });
}

void Head::Reaped(int pid, int status) {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    if (node.pid != pid) continue;
    watchdog_.Remove(pid);
    node.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    streams_.Drain(static_cast<int>(i));
    MaybeFinished(i);
  }
}

void Head::MaybeFinished(size_t i) {
  Node& node = nodes_[i];
  if (node.finished || !node.code || streams_.open(static_cast<int>(i)) > 0) return;
  node.finished = true;
  if (!server_.ended() && !stopping_) {
    // The agent is gone and the job has not ended: it never joined, or it died.
    std::vector<std::string> last = node.err_tail->LastLines(1);
    std::string cause = fmt::format("{}: {} exited with code {} before the job ended{}", node.name, node.launcher,
                                    *node.code, last.empty() ? "" : " (" + last.back() + ")");
    Stop(1, cause);
  }
  Complete();
}

void Head::Stop(int code, const std::string& cause) {
  if (!stopping_) {
    stopping_ = true;
    server_.AbortAll(code, cause);
    // No agent had joined: no coordinator log line says why, so say it here.
    if (!server_.ended()) console_.Say(cause);
  }
  ArmDeadline();
}

// Once the job is over, every agent has --shutdown-timeout (plus slack) to finish.
void Head::ArmDeadline() {
  if (deadline_armed_) return;
  deadline_armed_ = true;
  WaitDeadline(plan_.shutdown_timeout + kFinishSlack);
}

void Head::WaitDeadline(Clock::duration after) {
  deadline_.expires_after(after);
  deadline_.async_wait([this, alive = life_.token()](boost::system::error_code ec) {
    if (ec || alive.expired()) return;
    // Agents blocked on their output wait for our reader, not on a hang: no line
    // may be lost to a slow console.
    if (console_.full()) {
      WaitDeadline(kFinishSlack);
      return;
    }
    for (const Node& n : nodes_)
      if (!n.code) console_.Say(fmt::format("{}: the agent did not finish; killing its {}", n.name, n.launcher));
    KillAll();
  });
}

void Head::KillAll() {
  for (const Node& n : nodes_)
    if (!n.code) kill(-n.pid, SIGKILL);
}

bool Head::AllFinished() const {
  for (const Node& n : nodes_)
    if (!n.finished) return false;
  return true;
}

void Head::Run(std::function<void(int)> done) {
  done_ = std::move(done);
  reaper_.Start();
  for (int sig : plan_.stop_signals) signals_.add(sig);
  WaitSignals();
  reaper_.ReapNow();  // a node that failed before the reaper was in place
  // Once the coordinator has ended the job, the agents' time to finish starts.
  server_.OnJobEnded([this, alive = life_.token()](const rdzv::JobEnded&) {
    if (!alive.expired()) ArmDeadline();
  });
  Complete();  // no node could be started
}

void Head::Complete() {
  if (completed_ || !AllFinished()) return;
  completed_ = true;
  boost::system::error_code ignored;
  signals_.cancel(ignored);
  reaper_.Stop();
  deadline_.cancel();
  streams_.CloseAll();
  int code = 1;
  if (stop_signal_ != 0) {
    code = 128 + stop_signal_;
  } else if (const auto& ended = server_.ended()) {
    if (ended->exit_code != 0) {
      // A job stopped on a hang shows its summary under the cause, as a single node does.
      std::vector<std::string> lines = hang_.StopLines(ended->summary);
      if (lines.empty()) lines.push_back(fmt::format("job: {}", ended->summary));
      for (const std::string& line : lines) console_.Say(line);
    }
    code = ended->exit_code;
  }
  // The cancelled handlers above are queued already; `done` runs after them.
  asio::post(io_, [done = std::move(done_), code] { done(code); });
}

}  // namespace

AgentCommand AgentCommandFor(const HeadPlan& h, int node_rank, const std::string& self, const std::string& endpoint,
                             const std::string& run_id, const std::string& cwd) {
  const HostEntry& entry = h.hosts[static_cast<size_t>(node_rank)];
  AgentCommand c;
  c.cwd = cwd;
  c.env = h.exports;
  if (!entry.only_slots.empty()) c.env.emplace_back("CUDA_VISIBLE_DEVICES", fmt::format("{}", fmt::join(entry.only_slots, ",")));
  c.argv = {self,
            "--rdzv-endpoint", endpoint,
            "--rdzv-id", run_id,
            "--nnodes", fmt::format("{}", h.hosts.size()),
            "--node-rank", fmt::format("{}", node_rank),
            "--nproc-per-node", h.workers[static_cast<size_t>(node_rank)]};
  // A node named by a loopback address of this machine (127.0.0.2) is that
  // address, as a node of a real cluster is its own: MASTER_ADDR and TF_CONFIG
  // then differ per node (dlaunch job runs each instance on one).
  if (IsLoopbackAddress(entry.host)) c.argv.insert(c.argv.end(), {"--local-addr", entry.host});
  // --role-env values go with -x's, over stdin (cli.hpp, kRoleEnvVarPrefix).
  int role_values = 0;
  for (size_t i = 0; i < h.agent_flags.size(); ++i) {
    if (h.agent_flags[i] == "--role-env" && i + 1 < h.agent_flags.size()) {
      c.env.emplace_back(fmt::format("{}{}", kRoleEnvVarPrefix, role_values++), h.agent_flags[++i]);
      continue;
    }
    c.argv.push_back(h.agent_flags[i]);
  }
  // Last, so that a forwarded --rdzv-conf cannot make an agent host a coordinator.
  c.argv.insert(c.argv.end(), {"--rdzv-conf", "is_host=0"});
  c.argv.insert(c.argv.end(), h.command.begin(), h.command.end());
  return c;
}

namespace {

// This machine, by a loopback name or its own host name (as mpirun has it).
bool IsThisMachine(const std::string& host) { return IsLoopbackName(host) || host == HostName(); }

// How node `host` is reached: this machine through a local shell, any other
// through ssh or pdsh.
RemoteOptions RemoteFor(const HeadPlan& plan, const std::string& host) {
  RemoteOptions r;
  r.kind = IsThisMachine(host) ? RemoteKind::kLocal : plan.remote == "pdsh" ? RemoteKind::kPdsh : RemoteKind::kSsh;
  r.port = plan.ssh_port;
  r.identity = plan.ssh_identity;
  r.ssh_options = plan.ssh_options;
  return r;
}

std::string SelfPath(const HeadPlan& plan, std::error_code& ec) {
  if (!plan.remote_dlaunch.empty()) return plan.remote_dlaunch;
  return std::filesystem::read_symlink("/proc/self/exe", ec).string();
}

}  // namespace

int ExplainHead(const HeadPlan& plan) {
  const std::vector<HostEntry>& hosts = plan.hosts;
  std::error_code ec;
  std::string self = SelfPath(plan, ec);
  std::string cwd = std::filesystem::current_path(ec).string();
  std::string out = fmt::format("mode: head-node launch of {} node(s); the coordinator runs here{}\n", hosts.size(),
                                plan.local_addr.empty() ? "" : " on " + plan.local_addr);
  for (size_t i = 0; i < hosts.size(); ++i) {
    const HostEntry& h = hosts[i];
    RemoteOptions r = RemoteFor(plan, h.host);
    AgentCommand c = AgentCommandFor(plan, static_cast<int>(i), self, "HEAD:PORT", plan.run_id.empty() ? "RUN_ID" : plan.run_id, cwd);
    c.token = "TOKEN";
    c.secrets_on_stdin = r.kind != RemoteKind::kPdsh;
    out += fmt::format("node {}: {}, workers {}, through {}\n", i, h.host, plan.workers[i],
                       r.kind == RemoteKind::kLocal ? "a local shell" : plan.remote);
    std::string line = AgentShellLine(c);
    std::vector<std::string> argv = LauncherArgv(r, h.host, line);
    argv.pop_back();  // the line itself, shown unquoted below
    std::vector<std::string> shown;
    for (const std::string& a : argv) shown.push_back(ShellQuote(a));
    out += fmt::format("  {} LINE\n  LINE: {}\n", fmt::join(shown, " "), line);
  }
  WriteAll(STDOUT_FILENO, out);
  return 0;
}

int RunHead(const HeadPlan& plan, const envmap::EnvMap& env) {
  const std::vector<HostEntry>& hosts = plan.hosts;
  int n = static_cast<int>(hosts.size());
  for (const std::string& x : plan.exports_unset)
    WriteAll(STDERR_FILENO, fmt::format("dlaunch: -x {}: not set here, so not passed on\n", x));
  bool through_pdsh = false;
  for (const HostEntry& h : hosts) through_pdsh = through_pdsh || RemoteFor(plan, h.host).kind == RemoteKind::kPdsh;
  if (through_pdsh && !plan.exports.empty())
    WriteAll(STDERR_FILENO, "dlaunch: --remote pdsh: pdsh forwards no stdin, so the -x values go on the command line, "
                            "where every user on the nodes can read them (--remote ssh keeps them off it)\n");

  std::string token = plan.token;
  if (token.empty()) {
    // No shared secret given: a fresh one for this job, handed to each agent on
    // its ssh's stdin, so nobody else can join the coordinator.
    Result<std::string> fresh = rdzv::RandomNonce();
    if (!fresh.ok()) return Fail(1, fresh.status().message());
    token = Hex(*fresh);
  }

  signal(SIGPIPE, SIG_IGN);
  EventLoop loop;
  asio::io_context& io = loop.io();
  Console console(io, STDOUT_FILENO, STDERR_FILENO);
  // The coordinator listens on the address that routes to the nodes, on a free port.
  std::string addr = plan.local_addr;
  bool all_local = true;
  for (const HostEntry& h : hosts) all_local = all_local && IsThisMachine(h.host);
  if (addr.empty() && all_local) addr = envmap::kLoopbackAddress;
  for (size_t i = 0; addr.empty() && i < hosts.size(); ++i) {
    if (IsThisMachine(hosts[i].host)) continue;
    Result<std::string> route = RouteAddress(io, hosts[i].host);
    if (!route.ok()) return Fail(kExitUsage, route.status().message());
    addr = *route;
  }
  std::string run_id = plan.run_id;
  if (run_id.empty()) {
    Result<std::string> nonce = rdzv::RandomNonce();
    if (!nonce.ok()) return Fail(1, nonce.status().message());
    run_id = Hex(nonce->substr(0, 8));
  }
  rdzv::CoordinatorOptions copts = plan.coordinator;
  copts.run_id = run_id;
  copts.token = token;
  auto log = [&console](const std::string& line) { console.Say(line); };
  Result<std::unique_ptr<rdzv::CoordinatorServer>> server =
      rdzv::CoordinatorServer::Start(io, rdzv::HostPort{addr, 0}, "--local-addr", rdzv::CoordinatorServer::OneJob(copts), log);
  if (!server.ok()) return Fail(kExitUsage, server.status().message());
  std::string endpoint = rdzv::HostPort{addr, (*server)->port()}.ToString();

  std::error_code ec;
  std::string self = SelfPath(plan, ec);
  if (self.empty()) return Fail(1, fmt::format("/proc/self/exe: cannot read ({}); give --remote-dlaunch PATH", ec.message()));
  std::string cwd = std::filesystem::current_path(ec).string();

  EventLog events;
  if (!plan.events.empty()) {
    if (Status s = events.Open(plan.events); !s.ok()) return Fail(kExitUsage, s.message());
  }
  events.SetRunId(run_id);
  events.Emit("job_started", {{"mode", "head"}, {"nodes", n}, {"pid", static_cast<int>(getpid())}});

  // The coordinator here judges hangs across the nodes; their stacks go to a
  // directory made at the first report, and kept.
  std::string stacks_dir;
  JobHangReporter hang(log, &events, [&stacks_dir]() -> Result<std::string> {
    if (stacks_dir.empty()) {
      Result<std::string> made = NewStacksDir();
      if (!made.ok()) return made;
      stacks_dir = *made;
    }
    return stacks_dir;
  });
  (*server)->OnHang({[&hang](const std::string&, const rdzv::HangSuspected& s) { hang.Suspected(s); },
                     [&hang](const std::string&, const rdzv::HangReport& r) { hang.Report(r); }});

  // The head's socket shows the whole job: every node, asked through the coordinator.
  std::vector<std::string> shown = plan.command;
  if (!shown.empty() && shown.front() == "--") shown.erase(shown.begin());
  JobLiveSource job_live(**server, LiveJob{run_id, UtcNow(), shown, 0});
  Result<std::string> live_path = LiveSocketPath(env, run_id);

  Watchdog watchdog;
  if (Status s = watchdog.Start("", live_path.ok() ? *live_path : ""); !s.ok()) return Fail(1, s.message());
  std::unique_ptr<LiveServer> live_server = StartLiveView(io, console, live_path, job_live);
  Head head(plan, io, console, watchdog, **server, hang);
  std::vector<std::string> base_env;
  for (const auto& [k, v] : env) base_env.push_back(k + "=" + v);

  int code = 0;
  for (int i = 0; i < n; ++i) {
    const std::string& host = hosts[static_cast<size_t>(i)].host;
    RemoteOptions ropts = RemoteFor(plan, host);
    AgentCommand command = AgentCommandFor(plan, i, self, endpoint, run_id, cwd);
    command.token = token;
    command.secrets_on_stdin = ropts.kind != RemoteKind::kPdsh;
    std::vector<std::string> argv = LauncherArgv(ropts, host, AgentShellLine(command));
    Result<std::string> exe = ResolveCommand(argv[0]);
    if (!exe.ok()) {
      code = exe.status().code() == Code::kNotFound ? kExitNotFound : kExitNotExecutable;
      console.Say(fmt::format("--remote {}: {}", plan.remote, exe.status().message()));
      break;
    }
    SpawnSpec spec;
    spec.exe = *exe;
    spec.args.assign(argv.begin() + 1, argv.end());
    spec.env = base_env;
    if (ropts.kind == RemoteKind::kPdsh) {
      auto [name, value] = PdshEnv(ropts);
      spec.env.push_back(name + "=" + value);
    }
    std::string name = fmt::format("node {} ({})", i, host);
    Status s = head.StartNode(name, argv[0] == "/bin/sh" ? "sh" : argv[0], spec, AgentStdin(command));
    if (!s.ok()) {
      code = 1;
      console.Say(fmt::format("{}: {}", name, s.message()));
      break;
    }
  }
  if (code != 0) head.Stop(code, "the launch failed on the head");
  head.Run([&loop](int result) { loop.Exit(result); });
  int result = loop.Run();
  int final_code = code != 0 ? code : result;
  std::string cause = final_code == 0 ? "" : (*server)->ended() ? (*server)->ended()->summary : "the launch failed on the head";
  live_server.reset();  // the socket goes as the job ends
  events.Emit("job_finished", {{"exit_code", final_code}, {"root_cause", cause}});
  watchdog.Stop();
  console.Drain(plan.stop_signals);
  return final_code;
}

}  // namespace dlaunch::launcher
