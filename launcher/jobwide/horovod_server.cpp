#include "launcher/jobwide/horovod_server.hpp"

#include <algorithm>

#include <boost/asio/ip/tcp.hpp>
#include <fmt/format.h>

#include "envmap/worker_env.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

namespace asio = boost::asio;

namespace {

asio::ip::address Plain(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  return a;
}

// The addresses `host` resolves to (a literal is itself); none when it does not.
std::vector<asio::ip::address> Resolve(asio::io_context& io, const std::string& host) {
  std::vector<asio::ip::address> out;
  boost::system::error_code ec;
  asio::ip::address literal = asio::ip::make_address(host, ec);
  if (!ec) return {Plain(literal)};
  asio::ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(host, "0", ec);
  if (ec) return out;
  for (const auto& entry : results) out.push_back(Plain(entry.endpoint().address()));
  return out;
}

HorovodStore::Method MethodOf(const std::string& m) {
  if (m == "GET") return HorovodStore::Method::kGet;
  if (m == "PUT") return HorovodStore::Method::kPut;
  if (m == "DELETE") return HorovodStore::Method::kDelete;
  return HorovodStore::Method::kOther;
}

}  // namespace

bool HorovodPeerAllowed(const asio::ip::address& peer, const std::vector<asio::ip::address>& nodes) {
  const asio::ip::address p = Plain(peer);
  if (p.is_loopback()) return true;
  return std::find(nodes.begin(), nodes.end(), p) != nodes.end();
}

http::ServerOptions HorovodServerOptions(int world) {
  http::ServerOptions o;
  o.name = "horovod store";
  o.max_clients = std::min<size_t>(4096, static_cast<size_t>(std::max(world, 1)) + 64);
  o.max_body = HorovodStoreLimitsFor(world).max_value;
  o.evict_after = std::chrono::milliseconds(250);
  o.not_admitted = "not an address of the job's nodes";
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
                                                            std::function<void(const std::string&)> say) {
  const int world = envmap::WorldSize(layout);
  const int port = envmap::HorovodStorePort(layout);
  std::unique_ptr<HorovodServer> self(
      new HorovodServer(envmap::HorovodScopes(layout), HorovodStoreLimitsFor(world), say));

  // The peers: every node's address, as this node resolves it. A node whose
  // address this node cannot tell (the static form names only node 0's) leaves
  // the filter off, and says so.
  std::vector<asio::ip::address> nodes;
  std::string unknown;
  for (const envmap::Node& node : layout.nodes) {
    std::vector<asio::ip::address> found = Resolve(io, node.addr);
    if (found.empty() && unknown.empty()) unknown = node.addr;
    nodes.insert(nodes.end(), found.begin(), found.end());
  }
  http::ServerOptions options = HorovodServerOptions(world);
  if (unknown.empty()) {
    options.admit = [nodes](const asio::ip::address& peer) { return HorovodPeerAllowed(peer, nodes); };
  } else {
    say(fmt::format("horovod store: no address for node '{}', so the store admits every peer that reaches it",
                    unknown));
  }

  // Bind the address the workers are given (HOROVOD_GLOO_RENDEZVOUS_ADDR).
  std::vector<asio::ip::address> here = Resolve(io, layout.master_addr);
  auto handler = [raw = self.get()](const http::Request& r) { return raw->Serve(r); };
  auto log = [say](const std::string& line) { say(line); };
  std::string bind_error;
  for (const asio::ip::address& a : here) {
    Result<std::unique_ptr<http::Server>> server =
        http::Server::Start(io, asio::ip::tcp::endpoint(a, static_cast<unsigned short>(port)), handler, log, options);
    if (server.ok()) {
      self->server_ = std::move(*server);
      break;
    }
    bind_error = server.status().message();
  }
  if (!self->server_) {
    if (!here.empty()) {
      say(fmt::format("horovod store: cannot listen on {} ({}); listening on every interface", layout.master_addr,
                      bind_error));
    }
    Result<std::unique_ptr<http::Server>> server = http::Server::Start(
        io, asio::ip::tcp::endpoint(asio::ip::tcp::v4(), static_cast<unsigned short>(port)), handler, log, options);
    if (!server.ok()) {
      return Status::Io(fmt::format("horovod store on {}:{} (MASTER_PORT + 1): {}", layout.master_addr, port,
                                    server.status().message()));
    }
    self->server_ = std::move(*server);
  }
  self->subject_ = "horovod store on " + http::FormatEndpoint(self->server_->endpoint());
  return self;
}

void HorovodServer::Reset() { store_ = std::make_unique<HorovodStore>(scopes_, limits_); }

int HorovodServer::port() const { return server_->endpoint().port(); }

http::Response HorovodServer::Serve(const http::Request& request) {
  HorovodStore::Reply reply = store_->Handle(MethodOf(request.method), request.target, request.body);
  if (!reply.refusal.empty()) {
    // One key per kind of refusal, not per peer: a peer cannot widen the log.
    log_.Log(std::to_string(reply.status),
             fmt::format("{}: refused {} {} from {}: {}", subject_, request.method,
                         PrintablePrefix(request.target, 80), request.peer, reply.refusal),
             [this, status = reply.status](size_t held) {
               return fmt::format("{}: refused {} more requests ({}) in the last {}s", subject_, held, status,
                                  log_.window().count() / 1000);
             },
             rendezvous::LogLimiter::Clock::now());
  }
  return http::Response{static_cast<unsigned>(reply.status), std::move(reply.body)};
}

}  // namespace dlaunch::launcher
