#include "rendezvous/server.hpp"

#include <fmt/format.h>

namespace dlaunch::rendezvous {

namespace asio = boost::asio;
using asio::ip::tcp;

CoordinatorServer::CoordinatorServer(asio::io_context& io, CoordinatorOptions options, LogSink log)
    : io_(io), acceptor_(io), ticker_(io), coordinator_(std::move(options)), log_(std::move(log)) {}

CoordinatorServer::~CoordinatorServer() {
  *alive_ = false;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  ticker_.cancel();
  for (auto& [id, conn] : conns_) conn->Close();
}

Result<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(asio::io_context& io, const HostPort& listen,
                                                                     const std::string& what,
                                                                     CoordinatorOptions options, LogSink log) {
  if (Status s = Validate(options); !s.ok()) return s;
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer(io, std::move(options), std::move(log)));
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  auto results = resolver.resolve(listen.host, std::to_string(listen.port), ec);
  if (ec || results.empty())
    return Status::InvalidArgument(fmt::format("{} {}: cannot resolve ({})", what, listen.ToString(), ec.message()));
  tcp::endpoint ep = results.begin()->endpoint();
  auto fail = [&](const char* step) {
    return Status::InvalidArgument(fmt::format("{} {}: cannot {} ({})", what, listen.ToString(), step, ec.message()));
  };
  if (server->acceptor_.open(ep.protocol(), ec); ec) return fail("open a socket");
  server->acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (server->acceptor_.bind(ep, ec); ec) return fail("listen");
  if (server->acceptor_.listen(asio::socket_base::max_listen_connections, ec); ec) return fail("listen");
  server->Accept();
  server->Tick();
  return server;
}

bool CoordinatorServer::Flushed() const {
  if (!ended_) return false;
  for (const auto& c : all_)
    if (!c.expired()) return false;
  return true;
}

int CoordinatorServer::port() const {
  boost::system::error_code ec;
  return acceptor_.local_endpoint(ec).port();
}

void CoordinatorServer::Accept() {
  acceptor_.async_accept([this, alive = alive_](boost::system::error_code ec, tcp::socket socket) {
    if (!*alive) return;
    if (ec) {
      if (ec != asio::error::operation_aborted) Accept();  // e.g. EMFILE: keep serving
      return;
    }
    ConnId id = next_id_++;
    auto conn = std::make_shared<Connection>(std::move(socket));
    conns_[id] = conn;
    std::erase_if(all_, [](const std::weak_ptr<Connection>& c) { return c.expired(); });
    all_.push_back(conn);
    Apply(coordinator_.OnConnect(id, conn->peer(), Clock::now()));
    conn->Start(
        [this, id, alive](Message m) {
          if (*alive) Apply(coordinator_.OnMessage(id, m, Clock::now()));
        },
        [this, id, alive](const Status& why) {
          if (!*alive) return;
          conns_.erase(id);
          if (why.code() == Code::kInvalidArgument) {
            Apply(coordinator_.OnProtocolError(id, why, Clock::now()));
          } else {
            Apply(coordinator_.OnDisconnect(id, Clock::now()));
          }
        });
    Accept();
  });
}

void CoordinatorServer::Apply(std::vector<Action> actions) {
  for (Action& action : actions) {
    if (auto* send = std::get_if<Send>(&action)) {
      auto it = conns_.find(send->conn);
      if (it != conns_.end()) it->second->Send(send->message);
    } else if (auto* close = std::get_if<Close>(&action)) {
      auto it = conns_.find(close->conn);
      if (it != conns_.end()) {
        it->second->Close();
        conns_.erase(it);
      }
    } else if (auto* log = std::get_if<Log>(&action)) {
      if (log_) log_(log->line);
    } else if (auto* ended = std::get_if<JobEnded>(&action)) {
      ended_ = *ended;
    }
  }
}

void CoordinatorServer::Tick() {
  ticker_.expires_after(kTickPeriod);
  ticker_.async_wait([this, alive = alive_](boost::system::error_code ec) {
    if (ec || !*alive) return;
    Apply(coordinator_.OnTick(Clock::now()));
    Tick();
  });
}

}  // namespace dlaunch::rendezvous
