#include "rendezvous/server.hpp"

#include <fcntl.h>

#include <fmt/format.h>

namespace dlaunch::rendezvous {

namespace asio = boost::asio;
using asio::ip::tcp;

CoordinatorServer::CoordinatorServer(asio::io_context& io, JobFactory factory, LogSink log)
    : io_(io), acceptor_(io), ticker_(io), factory_(std::move(factory)), log_(std::move(log)) {}

CoordinatorServer::~CoordinatorServer() {
  *alive_ = false;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  ticker_.cancel();
  for (auto& [id, conn] : conns_) conn->Close();
}

CoordinatorServer::JobFactory CoordinatorServer::OneJob(CoordinatorOptions options) {
  return [options](const Hello& hello) -> Result<CoordinatorOptions> {
    if (hello.run_id != options.run_id)
      return Status::InvalidArgument(
          fmt::format("this coordinator serves job '{}', not '{}' (check --rdzv-id)", options.run_id, hello.run_id));
    return options;
  };
}

Result<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(asio::io_context& io, const HostPort& listen,
                                                                     const std::string& what, JobFactory factory,
                                                                     LogSink log) {
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer(io, std::move(factory), std::move(log)));
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
  // Not inherited by workers or ssh clients (see Connection's constructor).
  fcntl(server->acceptor_.native_handle(), F_SETFD, FD_CLOEXEC);
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
    unrouted_[id] = Clock::now();
    std::erase_if(all_, [](const std::weak_ptr<Connection>& c) { return c.expired(); });
    all_.push_back(conn);
    conn->Start(
        [this, id, alive](Message m) {
          if (!*alive) return;
          auto route = route_.find(id);
          if (route == route_.end()) return OnFirstMessage(id, std::move(m));
          auto job = jobs_.find(route->second);
          if (job != jobs_.end()) Apply(route->second, job->second->OnMessage(id, m, Clock::now()));
        },
        [this, id, alive](const Status& why) {
          if (*alive) OnClosed(id, why);
        });
    Accept();
  });
}

// The first message picks the job: it must be a Hello.
void CoordinatorServer::OnFirstMessage(ConnId id, Message message) {
  auto conn = conns_.at(id);
  unrouted_.erase(id);
  auto* hello = std::get_if<Hello>(&message);
  auto refuse = [&](const std::string& why) {
    if (log_) log_(fmt::format("rendezvous: refused {} ({})", conn->peer(), why));
    conn->Send(Refused{why});
    conn->Close();
    conns_.erase(id);
  };
  if (hello == nullptr) return refuse(fmt::format("expected hello first, got {}", TypeName(message)));
  if (aborted_) return refuse(*aborted_);
  auto job = jobs_.find(hello->run_id);
  if (job == jobs_.end()) {
    Result<CoordinatorOptions> options = factory_(*hello);
    if (!options.ok()) return refuse(options.status().message());
    if (Status s = Validate(*options); !s.ok()) return refuse(s.message());
    job = jobs_.emplace(hello->run_id, std::make_unique<Coordinator>(std::move(*options))).first;
  }
  route_[id] = hello->run_id;
  std::string run_id = hello->run_id;
  Apply(run_id, job->second->OnConnect(id, conn->peer(), Clock::now()));
  auto again = jobs_.find(run_id);
  if (again != jobs_.end()) Apply(run_id, again->second->OnMessage(id, message, Clock::now()));
}

void CoordinatorServer::AbortAll(int code, const std::string& cause) {
  aborted_ = cause;
  std::vector<std::string> ids;
  for (const auto& [run_id, job] : jobs_) ids.push_back(run_id);
  for (const std::string& run_id : ids) {
    auto job = jobs_.find(run_id);
    if (job != jobs_.end()) Apply(run_id, job->second->AbortJob(code, cause));
  }
}

void CoordinatorServer::OnClosed(ConnId id, const Status& why) {
  auto conn = conns_.find(id);
  std::string peer = conn != conns_.end() ? conn->second->peer() : "a peer";
  if (conn != conns_.end()) conns_.erase(conn);
  unrouted_.erase(id);
  auto route = route_.find(id);
  if (route == route_.end()) {
    // It never said Hello, so no job hears of it; a bad frame is still worth a line.
    if (why.code() == Code::kInvalidArgument && log_)
      log_(fmt::format("rendezvous: dropped {} ({})", peer, why.message()));
    return;
  }
  std::string run_id = route->second;
  route_.erase(route);
  auto job = jobs_.find(run_id);
  if (job == jobs_.end()) return;
  Clock::time_point now = Clock::now();
  Apply(run_id, why.code() == Code::kInvalidArgument ? job->second->OnProtocolError(id, why, now)
                                                     : job->second->OnDisconnect(id, now));
}

void CoordinatorServer::Apply(std::string run_id, std::vector<Action> actions) {
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
      route_.erase(close->conn);
    } else if (auto* log = std::get_if<Log>(&action)) {
      if (log_) log_(log->line);
    } else if (auto* ended = std::get_if<JobEnded>(&action)) {
      ended_ = *ended;
      // Its connections are closed; forget the job so the run id can be used again.
      std::erase_if(route_, [&](const auto& r) { return r.second == run_id; });
      jobs_.erase(run_id);
      return;  // the coordinator is gone: its remaining actions went out above
    }
  }
}

void CoordinatorServer::Tick() {
  ticker_.expires_after(kTickPeriod);
  ticker_.async_wait([this, alive = alive_](boost::system::error_code ec) {
    if (ec || !*alive) return;
    Clock::time_point now = Clock::now();
    // A connection that never says Hello belongs to no job; drop it here.
    for (auto it = unrouted_.begin(); it != unrouted_.end();) {
      if (now - it->second < hello_timeout_) {
        ++it;
        continue;
      }
      auto conn = conns_.find(it->first);
      if (conn != conns_.end()) {
        if (log_) log_(fmt::format("rendezvous: dropped {} (no hello within {}s)", conn->second->peer(),
                                   std::chrono::duration_cast<std::chrono::seconds>(hello_timeout_).count()));
        conn->second->Close();
        conns_.erase(conn);
      }
      it = unrouted_.erase(it);
    }
    std::vector<std::string> ids;
    for (auto& [run_id, job] : jobs_) ids.push_back(run_id);
    for (const std::string& run_id : ids) {
      auto job = jobs_.find(run_id);
      if (job != jobs_.end()) Apply(run_id, job->second->OnTick(now));
    }
    Tick();
  });
}

}  // namespace dlaunch::rendezvous
