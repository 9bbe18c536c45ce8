#include "launcher/modes/head.hpp"

#include "launcher/config/groups.hpp"
#include "launcher/config/programs_codec.hpp"
#include "launcher/modes/head_nodes.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
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
#include "launcher/live/job_live.hpp"
#include "launcher/process/process.hpp"
#include "rendezvous/auth.hpp"
#include "launcher/jobwide/job_events.hpp"
#include "launcher/live/straggler_view.hpp"
#include "launcher/modes/straggler_glue.hpp"
#include "rendezvous/server.hpp"

namespace dlaunch::launcher {
namespace {

namespace asio = boost::asio;
namespace rdzv = dlaunch::rendezvous;
using Clock = std::chrono::steady_clock;

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

}  // namespace

AgentCommand AgentCommandFor(const HeadPlan& h, int node_rank, const std::string& self, const std::string& endpoint,
                             const std::string& run_id, const std::string& cwd) {
  const HostEntry& entry = h.hosts[static_cast<size_t>(node_rank)];
  AgentCommand c;
  c.cwd = cwd;
  c.env = h.exports;
  if (!h.programs.empty()) c.env.emplace_back(std::string(kProgramsVar), h.programs);
  if (!entry.only_slots.empty())
    c.env.emplace_back("CUDA_VISIBLE_DEVICES", fmt::format("{}", fmt::join(entry.only_slots, ",")));
  c.argv = {self,
            "--rdzv-endpoint",
            endpoint,
            "--rdzv-id",
            run_id,
            "--nnodes",
            fmt::format("{}", h.hosts.size()),
            "--node-rank",
            fmt::format("{}", node_rank),
            "--nproc-per-node",
            h.workers[static_cast<size_t>(node_rank)]};
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
    AgentCommand c = AgentCommandFor(plan, static_cast<int>(i), self, "HEAD:PORT",
                                     plan.run_id.empty() ? "RUN_ID" : plan.run_id, cwd);
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
  // Several programs: the ranks each group takes on the nodes above.
  if (!plan.programs.empty()) {
    Result<envmap::ProgramPlan> programs = DecodePrograms(plan.programs);
    envmap::JobLayout layout;
    for (size_t i = 0; programs.ok() && i < programs->node_counts.size(); ++i) {
      int n = 0;
      for (int c : programs->node_counts[i]) n += c;
      layout.nodes.push_back(envmap::Node{hosts[i].host, hosts[i].host, n, {}});
    }
    Result<envmap::ProgramTable> table =
        programs.ok() ? TableFor(*programs, layout) : Result<envmap::ProgramTable>(programs.status());
    out += table.ok() ? ExplainPrograms(*table) : fmt::format("groups: {}\n", table.status().message());
    bool through_pdsh = std::any_of(hosts.begin(), hosts.end(), [&](const HostEntry& h) {
      return RemoteFor(plan, h.host).kind == RemoteKind::kPdsh;
    });
    out += through_pdsh
               ? "  (each agent gets the groups in DLAUNCH_PROGRAMS, on its command line: pdsh forwards no stdin)\n"
               : "  (each agent gets the groups in DLAUNCH_PROGRAMS, over stdin with the -x values)\n";
  }
  WriteAll(STDOUT_FILENO, out);
  return 0;
}

bool SendsUserValues(const HeadPlan& plan) {
  if (!plan.exports.empty()) return true;
  if (plan.programs.empty()) return false;
  Result<envmap::ProgramPlan> programs = DecodePrograms(plan.programs);
  return !programs.ok() || std::any_of(programs->groups.begin(), programs->groups.end(),
                                       [](const envmap::ProgramGroup& g) { return !g.env.empty(); });
}

namespace {

// Says what the -x flags cannot pass on as asked: a name not set here, and
// values that pdsh must put where every user on the nodes can read them.
void WarnAboutExports(const HeadPlan& plan) {
  for (const std::string& x : plan.exports_unset)
    WriteAll(STDERR_FILENO, fmt::format("dlaunch: -x {}: not set here, so not passed on\n", x));
  bool through_pdsh = false;
  for (const HostEntry& h : plan.hosts)
    through_pdsh = through_pdsh || RemoteFor(plan, h.host).kind == RemoteKind::kPdsh;
  if (through_pdsh && SendsUserValues(plan))
    WriteAll(STDERR_FILENO,
             "dlaunch: --remote pdsh: pdsh forwards no stdin, so the -x values go on the command line, "
             "where every user on the nodes can read them (--remote ssh keeps them off it)\n");
}

// `given`, else a fresh random value: at most `bytes` random bytes, in hex.
Result<std::string> GivenOrFresh(const std::string& given, size_t bytes) {
  if (!given.empty()) return given;
  Result<std::string> fresh = rdzv::RandomNonce();
  if (!fresh.ok()) return fresh.status();
  return Hex(fresh->substr(0, bytes));
}

// Where the coordinator listens: --local-addr; loopback when every node is this
// machine; else this machine's address on the route to the first other node.
Result<std::string> CoordinatorAddress(asio::io_context& io, const HeadPlan& plan) {
  if (!plan.local_addr.empty()) return plan.local_addr;
  bool all_local = true;
  for (const HostEntry& h : plan.hosts) all_local = all_local && IsThisMachine(h.host);
  if (all_local) return std::string(base::kLoopbackAddress);
  for (const HostEntry& h : plan.hosts)
    if (!IsThisMachine(h.host)) return RouteAddress(io, h.host);
  return std::string(base::kLoopbackAddress);
}

// What every node's agent is started with, beside its own rank.
struct AgentLaunch {
  std::string self;      // dlaunch's path on the nodes
  std::string endpoint;  // the coordinator's HOST:PORT
  std::string run_id;
  std::string token;
  std::string cwd;
  std::vector<std::string> env;  // the head's environment, which each launcher inherits
};

// Starts every node's agent through its launcher. Returns 0, or the code of the
// first that could not start (said on the console): 126/127 for a launcher that
// cannot run, 1 otherwise.
int StartAgents(const HeadPlan& plan, const AgentLaunch& launch, HeadNodes& head, Console& console) {
  for (size_t i = 0; i < plan.hosts.size(); ++i) {
    const std::string& host = plan.hosts[i].host;
    RemoteOptions ropts = RemoteFor(plan, host);
    AgentCommand command =
        AgentCommandFor(plan, static_cast<int>(i), launch.self, launch.endpoint, launch.run_id, launch.cwd);
    command.token = launch.token;
    command.secrets_on_stdin = ropts.kind != RemoteKind::kPdsh;
    std::vector<std::string> argv = LauncherArgv(ropts, host, AgentShellLine(command));
    Result<std::string> exe = ResolveCommand(argv[0]);
    if (!exe.ok()) {
      console.Say(fmt::format("--remote {}: {}", plan.remote, exe.status().message()));
      return exe.status().code() == Code::kNotFound ? kExitNotFound : kExitNotExecutable;
    }
    SpawnSpec spec;
    spec.exe = *exe;
    spec.args.assign(argv.begin() + 1, argv.end());
    spec.env = launch.env;
    if (ropts.kind == RemoteKind::kPdsh) {
      auto [name, value] = PdshEnv(ropts);
      spec.env.push_back(name + "=" + value);
    }
    std::string name = fmt::format("node {} ({})", i, host);
    if (Status s = head.StartNode(name, argv[0] == "/bin/sh" ? "sh" : argv[0], spec, AgentStdin(command)); !s.ok()) {
      console.Say(fmt::format("{}: {}", name, s.message()));
      return 1;
    }
  }
  return 0;
}

}  // namespace

int RunHead(const HeadPlan& plan, const envmap::EnvMap& env) {
  WarnAboutExports(plan);
  // No shared secret given: a fresh one for this job, handed to each agent on
  // its ssh's stdin, so nobody else can join the coordinator.
  Result<std::string> token = GivenOrFresh(plan.token, std::string::npos);
  if (!token.ok()) return Fail(1, token.status().message());
  Result<std::string> run_id = GivenOrFresh(plan.run_id, 8);
  if (!run_id.ok()) return Fail(1, run_id.status().message());

  signal(SIGPIPE, SIG_IGN);
  EventLoop loop;
  asio::io_context& io = loop.io();
  Console console(io, STDOUT_FILENO, STDERR_FILENO);
  Result<std::string> addr = CoordinatorAddress(io, plan);
  if (!addr.ok()) return Fail(kExitUsage, addr.status().message());
  rdzv::CoordinatorOptions copts = plan.coordinator;
  copts.run_id = *run_id;
  copts.token = *token;
  auto log = [&console](const std::string& line) { console.Say(line); };
  Result<std::unique_ptr<rdzv::CoordinatorServer>> server = rdzv::CoordinatorServer::Start(
      io, rdzv::HostPort{*addr, 0}, "--local-addr", rdzv::CoordinatorServer::OneJob(copts), log);
  if (!server.ok()) return Fail(kExitUsage, server.status().message());

  std::error_code ec;
  AgentLaunch launch{SelfPath(plan, ec),
                     rdzv::HostPort{*addr, (*server)->port()}.ToString(),
                     *run_id,
                     *token,
                     std::filesystem::current_path(ec).string(),
                     {}};
  if (launch.self.empty())
    return Fail(1, fmt::format("/proc/self/exe: cannot read ({}); give --remote-dlaunch PATH", ec.message()));
  for (const auto& [k, v] : env) launch.env.push_back(k + "=" + v);

  EventLog events;
  if (!plan.events.empty()) {
    if (Status s = events.Open(plan.events); !s.ok()) return Fail(kExitUsage, s.message());
  }
  events.SetRunId(*run_id);
  events.Emit("job_started",
              {{"mode", "head"}, {"nodes", static_cast<int>(plan.hosts.size())}, {"pid", static_cast<int>(getpid())}});
  // The coordinator here judges hangs across the nodes.
  JobHangReporter hang(log, &events, KeptStacksDir(log));
  (*server)->OnHang({[&hang](const std::string&, const rdzv::HangSuspected& s) { hang.Suspected(s); },
                     [&hang](const std::string&, const rdzv::HangReport& r) { hang.Report(r); }});
  // And what becomes of its nodes: lost, spares, standbys, renumbered ranks.
  WriteJobEvents(**server, events);

  // The head's socket shows the whole job: every node, asked through the coordinator.
  std::vector<std::string> shown = plan.command;
  if (!shown.empty() && shown.front() == "--") shown.erase(shown.begin());
  JobLiveSource job_live(**server, LiveJob{*run_id, UtcNow(), shown, 0});
  // And names the straggler across them (straggler_glue.hpp), which the live view shows.
  AsioTimers timers(io);
  std::unique_ptr<StragglerWatch> straggler =
      JobStragglerWatch(plan.straggler, timers, events, console, **server, *run_id);
  StragglerLiveSource marked(job_live, [&straggler] { return straggler.get(); });
  Result<std::string> live_path = LiveSocketPath(env, *run_id);
  Watchdog watchdog;
  if (Status s = watchdog.Start("", live_path.ok() ? *live_path : ""); !s.ok()) return Fail(1, s.message());
  if (!watchdog.fallback_note().empty()) console.Say(watchdog.fallback_note());
  std::unique_ptr<LiveServer> live_server = StartLiveView(io, console, live_path, marked);

  HeadNodes head(plan, *run_id, io, console, watchdog, **server, hang);
  int code = StartAgents(plan, launch, head, console);
  if (code != 0) head.Stop(code, "the launch failed on the head");
  head.Run([&loop](int result) { loop.Exit(result); });
  int result = loop.Run();
  int final_code = code != 0 ? code : result;
  std::string cause = final_code == 0      ? ""
                      : (*server)->ended() ? (*server)->ended()->summary
                                           : "the launch failed on the head";
  live_server.reset();  // the socket goes as the job ends
  events.Emit("job_finished", {{"exit_code", final_code}, {"root_cause", cause}});
  watchdog.Stop();
  console.Drain(plan.stop_signals);
  return final_code;
}

}  // namespace dlaunch::launcher
