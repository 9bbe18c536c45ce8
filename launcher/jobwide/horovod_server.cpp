#include "launcher/jobwide/horovod_server.hpp"

#include <unistd.h>

#include <algorithm>

#include <boost/asio/ip/tcp.hpp>
#include <fmt/format.h>

#include "envmap/worker_env.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

namespace asio = boost::asio;

namespace {

// The addresses `host` resolves to (a literal is itself), or why it does not.
Result<std::vector<asio::ip::address>> Resolve(asio::io_context& io, const std::string& host) {
  boost::system::error_code ec;
  asio::ip::address literal = asio::ip::make_address(host, ec);
  if (!ec) return std::vector<asio::ip::address>{PlainAddress(literal)};
  asio::ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(host, "0", ec);
  if (ec) return Status::NotFound(fmt::format("does not resolve here: {}", ec.message()));
  std::vector<asio::ip::address> out;
  for (const auto& entry : results) out.push_back(PlainAddress(entry.endpoint().address()));
  return out;
}

HorovodStore::Method MethodOf(const std::string& m) {
  if (m == "GET") return HorovodStore::Method::kGet;
  if (m == "PUT") return HorovodStore::Method::kPut;
  if (m == "DELETE") return HorovodStore::Method::kDelete;
  return HorovodStore::Method::kOther;
}

}  // namespace

http::ServerOptions HorovodServerOptions(int world) {
  http::ServerOptions o;
  o.name = "horovod store";
  o.max_clients = std::min<size_t>(4096, static_cast<size_t>(std::max(world, 1)) + 64);
  o.max_body = HorovodStoreLimitsFor(world).max_value;
  o.evict_after = std::chrono::milliseconds(250);
  return o;
}

HorovodServer::HorovodServer(std::vector<std::pair<std::string, int>> scopes, HorovodStoreLimits limits,
                             std::function<void(const std::string&)> say)
    : scopes_(std::move(scopes)),
      limits_(limits),
      store_(std::make_unique<HorovodStore>(scopes_, limits_)),
      log_(std::move(say)) {}

HorovodServer::~HorovodServer() { log_.Flush(); }

Result<std::unique_ptr<HorovodServer>> HorovodServer::Start(asio::io_context& io, const envmap::JobLayout& layout,
                                                            bool nodes_known,
                                                            std::function<void(const std::string&)> say,
                                                            std::shared_ptr<SocketOwners> owners) {
  const int world = envmap::WorldSize(layout);
  const int port = envmap::HorovodStorePort(layout);
  std::unique_ptr<HorovodServer> self(
      new HorovodServer(envmap::HorovodScopes(layout), HorovodStoreLimitsFor(world), say));

  // Bind the address the workers are given (HOROVOD_GLOO_RENDEZVOUS_ADDR), and
  // nothing wider: a store on every interface would be reachable from networks
  // the job does not use.
  const std::string master = SafeUtf8(layout.master_addr, false);
  Result<std::vector<asio::ip::address>> here = Resolve(io, layout.master_addr);
  if (!here.ok()) {
    return Status::Io(fmt::format("horovod store: cannot listen on MASTER_ADDR {} ({}); it listens there or nowhere",
                                  master, here.status().message()));
  }

  // The peers (horovod_peers.hpp): this machine's sockets of the job's user,
  // and the nodes' addresses as this node resolves them.
  HorovodPeerRules rules;
  rules.uid = geteuid();
  rules.local = ThisMachineAddresses();
  if (nodes_known) {
    rules.nodes.emplace();
    for (const envmap::Node& node : layout.nodes) {
      Result<std::vector<asio::ip::address>> found = Resolve(io, node.addr);
      if (found.ok()) {
        rules.nodes->insert(rules.nodes->end(), found->begin(), found->end());
      } else {
        say(fmt::format("horovod store: node {} {}; connections from it are refused", SafeUtf8(node.addr, false),
                        found.status().message()));
      }
    }
  } else {
    say("horovod store: the static form names no other node (no -H, --hostfile or --nodes), so the store "
        "admits any remote peer that reaches it");
  }
  http::ServerOptions options = HorovodServerOptions(world);
  options.admit = [rules = std::move(rules), owners = std::move(owners)](const asio::ip::tcp::endpoint& ours,
                                                                         const asio::ip::tcp::endpoint& theirs) {
    return HorovodPeerRefusal(rules, *owners, ours, theirs);
  };

  auto handler = [raw = self.get()](const http::Request& r) { return raw->Serve(r); };
  auto log = [say](const std::string& line) { say(line); };
  std::string bind_error;
  for (const asio::ip::address& a : *here) {
    Result<std::unique_ptr<http::Server>> server =
        http::Server::Start(io, asio::ip::tcp::endpoint(a, static_cast<unsigned short>(port)), handler, log, options);
    if (server.ok()) {
      self->server_ = std::move(*server);
      break;
    }
    bind_error = server.status().message();
  }
  if (!self->server_) return Status::Io(fmt::format("{} (MASTER_ADDR {}, MASTER_PORT + 1)", bind_error, master));
  self->subject_ = "horovod store on " + http::FormatEndpoint(self->server_->endpoint());
  return self;
}

void HorovodServer::Reset() { store_ = std::make_unique<HorovodStore>(scopes_, limits_); }

int HorovodServer::port() const { return server_->endpoint().port(); }

http::Response HorovodServer::Serve(const http::Request& request) {
  HorovodStore::Reply reply = store_->Handle(MethodOf(request.method), request.target, request.body);
  if (!reply.refusal.empty()) {
    // One key per kind of refusal, not per peer: a peer cannot widen the log.
    log_.Log(
        std::to_string(reply.status),
        fmt::format("{}: refused {} {} from {}: {}", subject_, request.method, PrintablePrefix(request.target, 80),
                    request.peer, reply.refusal),
        [this, status = reply.status](size_t held) {
          return fmt::format("{}: refused {} more requests ({}) in the last {}s", subject_, held, status,
                             log_.window().count() / 1000);
        },
        rendezvous::LogLimiter::Clock::now());
  }
  return http::Response{static_cast<unsigned>(reply.status), std::move(reply.body)};
}

}  // namespace dlaunch::launcher
