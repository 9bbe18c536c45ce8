#include "launcher/multinode.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <memory>

#include <boost/asio/ip/tcp.hpp>
#include <fmt/format.h>

#include "launcher/agent.hpp"
#include "launcher/system.hpp"
#include "launcher/text.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/server.hpp"

namespace dlaunch::launcher {

namespace asio = boost::asio;
namespace rdzv = dlaunch::rendezvous;

namespace {

constexpr int kDefaultRdzvPort = 29400;  // torchrun's
constexpr int kExitUsage = 2;
// How long the host keeps serving after its own exit barrier, so the other
// agents receive their last message.
constexpr std::chrono::seconds kHostDrain{2};

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "dlaunch: %s\n", message.c_str());
  return code;
}

void PrintLog(const std::string& line) { std::fprintf(stderr, "dlaunch: %s\n", line.c_str()); }

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

bool IsLoopback(asio::io_context& io, const std::string& host) {
  boost::system::error_code ec;
  asio::ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(host, "0", ec);
  if (ec || results.empty()) return false;
  for (const auto& entry : results)
    if (!entry.endpoint().address().is_loopback()) return false;
  return true;
}

}  // namespace

bool UsesRendezvous(const Options& o) { return !o.rdzv_endpoint.empty() && !o.standalone; }

Result<std::string> ResolveToken(const Options& o, const envmap::EnvMap& env) {
  rdzv::TokenSources sources;
  if (!o.rdzv_token.empty()) sources.flag = o.rdzv_token;
  if (auto it = env.find(rdzv::kTokenEnvVar); it != env.end()) sources.env = it->second;
  if (!o.rdzv_token_file.empty()) {
    Result<rdzv::TokenFile> file = rdzv::ReadTokenFile(o.rdzv_token_file);
    if (!file.ok()) return file.status();
    sources.file = *file;
  }
  return rdzv::ChooseToken(sources);
}

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

int RunMultiNode(const Options& o, const envmap::EnvMap& env, RunPlan& plan, Watchdog& watchdog,
                 asio::io_context& io) {
  Result<rdzv::HostPort> endpoint = rdzv::ParseHostPort(o.rdzv_endpoint, kDefaultRdzvPort, "--rdzv-endpoint");
  if (!endpoint.ok()) return Fail(kExitUsage, endpoint.status().message());

  Result<std::string> token = ResolveToken(o, env);
  if (!token.ok()) return Fail(kExitUsage, token.status().message());

  Result<std::vector<HostEntry>> hosts = NodeList(o);
  if (!hosts.ok()) return Fail(kExitUsage, hosts.status().message());
  std::vector<std::string> node_list;
  for (const HostEntry& h : *hosts) node_list.push_back(h.host);
  int min_nodes = o.min_nodes, max_nodes = o.max_nodes;
  if (!node_list.empty()) min_nodes = max_nodes = static_cast<int>(node_list.size());

  std::string run_id = o.rdzv_id.empty() ? "none" : o.rdzv_id;  // torchrun's default id
  plan.layout.run_id = run_id;
  if (token->empty() && !IsLoopback(io, endpoint->host))
    std::fprintf(stderr, "dlaunch: rendezvous %s: no token, so anyone who reaches it can join "
                 "(set %s or --rdzv-token-file)\n", endpoint->ToString().c_str(), rdzv::kTokenEnvVar);

  // Host the coordinator when the endpoint is ours. With several agents on one
  // machine (loopback tests) each would qualify; the first to bind hosts it.
  std::unique_ptr<rdzv::CoordinatorServer> server;
  bool want_host = o.is_host.value_or(IsLocalAddress(io, endpoint->host));
  if (want_host) {
    rdzv::CoordinatorOptions copts;
    copts.endpoint = endpoint->ToString();
    copts.run_id = run_id;
    copts.min_nodes = min_nodes;
    copts.max_nodes = max_nodes;
    copts.join_timeout = o.join_timeout;
    copts.last_call_timeout = o.last_call_timeout;
    copts.heartbeat_timeout = o.heartbeat_timeout;
    copts.max_restarts = o.max_restarts;
    copts.token = *token;
    copts.node_list = node_list;
    copts.master_port = o.master_port.value_or(0);
    if (Status s = rdzv::Validate(copts); !s.ok()) return Fail(kExitUsage, s.message());
    auto started = rdzv::CoordinatorServer::Start(io, *endpoint, "--rdzv-endpoint",
                                                  rdzv::CoordinatorServer::OneJob(copts), PrintLog);
    if (started.ok()) {
      server = std::move(*started);
    } else if (o.is_host.value_or(false)) {
      return Fail(kExitUsage, started.status().message());
    }
  }

  // A port free here, offered as MASTER_PORT in case this node becomes rank 0.
  Result<PortReservation> master_hold = o.master_port ? Result<PortReservation>(PortReservation())
                                                      : PortReservation::AnyFree();
  if (!master_hold.ok()) return Fail(1, master_hold.status().message());

  AgentOptions aopts;
  aopts.endpoint = *endpoint;
  aopts.token = *token;
  aopts.join.run_id = run_id;
  aopts.min_nodes = min_nodes;
  aopts.max_nodes = max_nodes;
  aopts.max_restarts = o.max_restarts;
  aopts.join.host = HostName();
  if (!o.local_addr.empty()) aopts.join.addrs.push_back(o.local_addr);
  aopts.join.nproc = plan.supervisor.nproc;
  aopts.join.gpus = static_cast<int>(plan.gpus.size());
  aopts.join.requested_node_rank = o.node_rank_given ? o.node_rank : -1;
  aopts.join.master_port_hint = master_hold->port();
  // Only TF_CONFIG and Azure ML's hostfile list other nodes; without them the
  // coordinator sends this node's row alone.
  aopts.join.wants_table = plan.flavors.azure || !plan.layout.roles.empty() ? 1 : 0;
  aopts.join_timeout = o.join_timeout;
  aopts.heartbeat_timeout = o.heartbeat_timeout;
  aopts.heartbeat_interval = o.heartbeat_timeout / 3;
  aopts.quiet_abort = server != nullptr;
  Agent agent(io, aopts);

  // The coordinator drives restarts across nodes; locally each generation runs once.
  plan.supervisor.max_restarts = 0;
  PrintNotices(plan);
  int code = 1;
  for (;;) {
    Result<rdzv::Assignment> a = agent.WaitAssignment();
    if (!a.ok()) {
      code = Fail(1, a.status().message());
      break;
    }
    envmap::JobLayout& layout = plan.layout;
    if (static_cast<int>(a->nodes.size()) == a->nnodes) {
      layout.nodes = a->nodes;
    } else {
      Result<std::vector<envmap::Node>> table =
          a->nodes.size() == 1 ? envmap::PartialTable(a->nnodes, a->node_rank, a->nodes.front(), a->rank_offset, a->world_size)
                               : Result<std::vector<envmap::Node>>(Status::InvalidArgument(fmt::format(
                                     "assignment: {} rows for a job of {} nodes", a->nodes.size(), a->nnodes)));
      if (!table.ok()) {
        code = Fail(1, fmt::format("{}: bad assignment ({})", o.rdzv_endpoint, table.status().message()));
        break;
      }
      layout.nodes = std::move(*table);
    }
    layout.node_rank = a->node_rank;
    layout.master_addr = a->master_addr;
    layout.master_port = a->master_port;
    layout.run_id = a->run_id;
    layout.restart_count = a->restart_count;
    if (Status s = envmap::Validate(layout); !s.ok()) {
      code = Fail(1, fmt::format("{}: bad assignment ({})", o.rdzv_endpoint, s.message()));
      break;
    }
    code = RunJob(plan, watchdog, io, &agent);
    if (!agent.restart_pending()) break;
  }

  if (server) {
    // Serve until the coordinator has ended the job and told every agent.
    auto deadline = std::chrono::steady_clock::now() + kHostDrain;
    io.restart();
    while (!server->Flushed() && std::chrono::steady_clock::now() < deadline)
      io.run_one_for(std::chrono::milliseconds(50));
    if (server->ended() && server->ended()->exit_code != 0)
      std::fprintf(stderr, "dlaunch: job: %s\n", server->ended()->summary.c_str());
  }
  return code;
}

}  // namespace dlaunch::launcher
