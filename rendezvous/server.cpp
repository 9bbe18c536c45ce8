#include "rendezvous/server.hpp"

#include <fcntl.h>

#include <algorithm>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "rendezvous/fd_limit.hpp"

namespace dlaunch::rendezvous {

namespace asio = boost::asio;
using asio::ip::tcp;

CoordinatorServer::CoordinatorServer(asio::io_context& io, JobFactory factory, LogSink log)
    : io_(io),
      acceptor_(io),
      ticker_(io),
      factory_(std::move(factory)),
      log_(std::move(log)),
      accept_retry_(io,
                    [this](const std::string& what) {
                      if (log_) log_(subject_ + ": " + what);
                    }),
      peer_log_(log_) {}

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
      return Status::InvalidArgument(fmt::format("this coordinator serves job {}, not {} (check --rdzv-id)",
                                                 QuoteId(options.run_id), QuoteId(hello.run_id)));
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
  // The kernel caps the backlog at net.core.somaxconn; asking for the most lets that
  // sysctl alone decide (SOMAXCONN, 4096, would cap it here too). bench/SCALE.md.
  constexpr int kListenBacklog = 65535;
  if (server->acceptor_.listen(kListenBacklog, ec); ec) return fail("listen");
  server->subject_ = "rendezvous " + HostPort{listen.host, server->port()}.ToString();
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
    // Out of fds or memory: wait, and say so once; a peer that left between
    // its SYN and accept() is nothing wrong here.
    if (ec) return accept_retry_.Failed(ec, [this] { Accept(); });
    accept_retry_.Accepted();
    ConnId id = next_id_++;
    auto conn = std::make_shared<Connection>(std::move(socket));
    conns_[id] = conn;
    lobby_[id].since = clock_.Now();
    // Swept when it has doubled since the last sweep: O(1) a connection, where a
    // sweep on every accept made N connections cost O(N^2).
    if (all_.size() >= 2 * swept_size_) {
      std::erase_if(all_, [](const std::weak_ptr<Connection>& c) { return c.expired(); });
      swept_size_ = std::max<std::size_t>(all_.size(), 64);
    }
    all_.push_back(conn);
    // The handlers hold no `alive`: a Connection calls none after Close() (or its
    // own failure), and every connection still in conns_ is closed by the
    // destructor; the others were closed or failed when they left conns_. So
    // [this, id] is enough, and it fits std::function without a heap block
    // (two fewer allocations an agent).
    conn->Start(
        [this, id](Message m) {
          auto route = route_.find(id);
          if (route == route_.end()) return OnLobbyMessage(id, std::move(m));
          auto job = jobs_.find(route->second);
          if (job != jobs_.end()) Apply(route->second, job->second->OnMessage(id, m, clock_.Now()));
        },
        [this, id](const Status& why) { OnClosed(id, why); });
    Accept();
  });
}

void CoordinatorServer::SendTo(Connection& conn, const Message& message) {
  // Coordinator messages are built from bounded parts; this is the last guard, so
  // that an oversized one is a logged refusal rather than an exception.
  if (Status s = CheckEncodable(message); !s.ok()) {
    if (log_)
      log_(
          fmt::format("{}: closed {}: cannot send its {} ({})", subject_, conn.peer(), TypeName(message), s.message()));
    conn.Close();
    return;
  }
  conn.Send(message);
}

void CoordinatorServer::LogDrop(const std::string& line, Clock::time_point now) {
  peer_log_.Log(
      "drops", line,
      [subject = subject_, window = peer_log_.window()](std::size_t n) {
        return fmt::format("{}: dropped {} more connection{} in the last {}", subject, n, n == 1 ? "" : "s",
                           FormatDuration(window));
      },
      now);
}

void CoordinatorServer::RefuseInLobby(ConnId id, const std::string& why) {
  auto conn = conns_.at(id);
  LogDrop(fmt::format("{}: refused {} ({})", subject_, conn->peer(), why), clock_.Now());
  SendTo(*conn, Refused{subject_ + ": " + why});
  conn->Close();
  conns_.erase(id);
  lobby_.erase(id);
}

// Hello, Challenge, Proof and Join happen here, before the connection belongs to
// any job: a job is created (or reached) only by an authenticated Join.
void CoordinatorServer::OnLobbyMessage(ConnId id, Message message) {
  auto it = lobby_.find(id);
  if (it == lobby_.end()) return;
  Lobby& lobby = it->second;
  if (!lobby.hello) {
    auto* hello = std::get_if<Hello>(&message);
    if (hello == nullptr) return RefuseInLobby(id, fmt::format("expected hello first, got {}", TypeName(message)));
    ++counters_.hellos;
    if (aborted_) return RefuseInLobby(id, *aborted_);
    Result<CoordinatorOptions> options = factory_(*hello);
    if (!options.ok()) return RefuseInLobby(id, options.status().message());
    if (Status s = Validate(*options); !s.ok()) return RefuseInLobby(id, s.message());
    Result<Challenge> challenge =
        AnswerHello(options->token, options->run_id, *hello, options->nonce_source, lobby.handshake);
    if (!challenge.ok()) {
      bool tokenless = !options->token.empty() && hello->nonce.empty() && hello->version == kProtocolVersion &&
                       hello->run_id == options->run_id;
      if (tokenless) ++counters_.auth_refused;
      return RefuseInLobby(id, challenge.status().message());
    }
    lobby.proven = options->token.empty();
    lobby.hello = std::move(*hello);
    lobby.token = options->token;
    return SendTo(*conns_.at(id), *challenge);
  }
  if (!lobby.proven) {
    auto* proof = std::get_if<Proof>(&message);
    if (proof == nullptr) return RefuseInLobby(id, fmt::format("unexpected {} before the proof", TypeName(message)));
    if (Status s = CheckProof(lobby.token, lobby.hello->run_id, lobby.handshake, *proof); !s.ok()) {
      ++counters_.auth_refused;
      return RefuseInLobby(id, s.message());
    }
    lobby.proven = true;
    return;
  }
  if (!std::holds_alternative<Join>(message))
    return RefuseInLobby(id, fmt::format("unexpected {} before the join", TypeName(message)));
  if (aborted_) return RefuseInLobby(id, *aborted_);
  std::string run_id = lobby.hello->run_id;
  auto job = jobs_.find(run_id);
  if (job == jobs_.end()) {
    Result<CoordinatorOptions> options = factory_(*lobby.hello);
    if (!options.ok()) return RefuseInLobby(id, options.status().message());
    MakeFdRoom(run_id, options->max_nodes);
    job = jobs_.emplace(run_id, std::make_unique<Coordinator>(std::move(*options))).first;
  }
  lobby_.erase(it);
  ++counters_.joined;
  route_[id] = run_id;
  Clock::time_point now = clock_.Now();
  Apply(run_id, job->second->OnAuthenticated(id, conns_.at(id)->peer(), now));
  auto again = jobs_.find(run_id);
  if (again != jobs_.end() && route_.count(id)) Apply(run_id, again->second->OnMessage(id, message, now));
}

void CoordinatorServer::MakeFdRoom(const std::string& run_id, int max_nodes) {
  FdLimit limit = CurrentFdLimit();
  if (max_nodes < 0 || static_cast<std::uint64_t>(max_nodes) <= AgentsAllowed(limit)) return;
  limit = RaiseFdLimit();
  std::string line = FdShortage(subject_, run_id, max_nodes, limit);
  if (line.empty() || fd_warned_) return;
  fd_warned_ = true;
  if (log_) log_(line);
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
  // Challenged but never proven: an agent with another token hangs up here, since
  // it checks the coordinator's proof before sending its own.
  if (auto lobby = lobby_.find(id); lobby != lobby_.end() && lobby->second.hello && !lobby->second.proven)
    ++counters_.auth_refused;
  lobby_.erase(id);
  auto route = route_.find(id);
  if (route == route_.end()) {
    // It never joined, so no job hears of it; a bad frame is still worth a line.
    if (why.code() == Code::kInvalidArgument)
      LogDrop(fmt::format("{}: dropped {} ({})", subject_, peer, why.message()), clock_.Now());
    return;
  }
  std::string run_id = route->second;
  route_.erase(route);
  auto job = jobs_.find(run_id);
  if (job == jobs_.end()) return;
  Clock::time_point now = clock_.Now();
  Apply(run_id, why.code() == Code::kInvalidArgument ? job->second->OnProtocolError(id, why, now)
                                                     : job->second->OnDisconnect(id, now));
}

void CoordinatorServer::Ask(const std::string& run_id, std::uint64_t tag, const std::string& what,
                            std::chrono::milliseconds timeout) {
  auto job = jobs_.find(run_id);
  if (job == jobs_.end()) {
    std::string problem = ended_ ? "the job has ended" : "no node has joined yet";
    return Apply(run_id, {QueryAnswered{tag, what, {}, problem}});
  }
  Apply(run_id, job->second->Ask(tag, what, timeout, clock_.Now()));
}

void CoordinatorServer::Apply(std::string run_id, std::vector<Action> actions) {
  for (Action& action : actions) {
    bool wrote = ExpandWrites(action, [this](const Action& one) {
      if (const auto* send = std::get_if<Send>(&one)) {
        auto it = conns_.find(send->conn);
        if (it != conns_.end()) SendTo(*it->second, send->message);
        return;
      }
      ConnId conn = std::get<Close>(one).conn;
      auto it = conns_.find(conn);
      if (it != conns_.end()) {
        it->second->Close();
        conns_.erase(it);
      }
      route_.erase(conn);
    });
    if (wrote) continue;
    if (auto* log = std::get_if<Log>(&action)) {
      if (log->limit.empty()) {
        if (log_) log_(log->line);
      } else {
        // Per job and kind: one job's flood does not hide another job's lines.
        auto held = [subject = subject_, what = log->limit, window = peer_log_.window()](std::size_t n) {
          return fmt::format("{}: {} more {} in the last {} (not logged)", subject, n, what, FormatDuration(window));
        };
        peer_log_.Log(run_id + '\n' + log->limit, log->line, held, clock_.Now());
      }
    } else if (auto* lost = std::get_if<NodeLost>(&action)) {
      ++counters_.nodes_lost;
      if (on_node_lost_) on_node_lost_(*lost);
    } else if (auto* event = std::get_if<JobEvent>(&action)) {
      if (const auto* spares = event->fields.if_contains("spares"); spares && spares->is_int64()) {
        std::uint64_t& mine = spares_[run_id];
        counters_.spares = counters_.spares - mine + static_cast<std::uint64_t>(spares->as_int64());
        mine = static_cast<std::uint64_t>(spares->as_int64());
      }
      if (on_job_event_) on_job_event_(*event);
    } else if (auto* suspected = std::get_if<HangSuspected>(&action)) {
      if (on_hang_.suspected) on_hang_.suspected(run_id, *suspected);
    } else if (auto* report = std::get_if<HangReport>(&action)) {
      if (on_hang_.report) on_hang_.report(run_id, *report);
    } else if (auto* answered = std::get_if<QueryAnswered>(&action)) {
      for (const auto& hook : on_answered_)
        boost::asio::post(io_, [hook, a = *answered, alive = alive_] {
          if (*alive) hook(a);
        });
    } else if (auto* ended = std::get_if<JobEnded>(&action)) {
      peer_log_.Flush();  // the counts of lines held back belong with the job's end
      if (log_ && log_job_ends_) log_(ended->summary);
      ended_ = *ended;
      if (on_ended_) boost::asio::post(io_, [hook = on_ended_, e = *ended] { hook(e); });
      // Its connections are closed; forget the job so the run id can be used again.
      std::erase_if(route_, [&](const auto& r) { return r.second == run_id; });
      jobs_.erase(run_id);
      idle_since_.erase(run_id);
      if (auto it = spares_.find(run_id); it != spares_.end()) {
        counters_.spares -= it->second;  // an ended job's spares were sent away
        spares_.erase(it);
      }
      return;  // the coordinator is gone: its remaining actions went out above
    }
  }
}

void CoordinatorServer::Tick() {
  ticker_.expires_at(clock_.Arm(clock_.Now() + kTickPeriod));
  ticker_.async_wait([this, alive = alive_](boost::system::error_code ec) {
    if (ec || !*alive) return;
    Clock::time_point now = clock_.Now();
    // A connection that never joins belongs to no job; drop it here. Ids grow
    // with the time of accept, so the expired ones come first and the walk stops
    // at the first that is not: O(expired), not O(lobby), on every tick.
    for (auto it = lobby_.begin(); it != lobby_.end();) {
      if (now - it->second.since < hello_timeout_) break;
      auto conn = conns_.find(it->first);
      if (conn != conns_.end()) {
        LogDrop(fmt::format("{}: dropped {} (no join within {})", subject_, conn->second->peer(),
                            FormatDuration(hello_timeout_)),
                now);
        conn->second->Close();
        conns_.erase(conn);
      }
      it = lobby_.erase(it);
    }
    peer_log_.Tick(now);
    ExpireJobs(now);
    auto unread = [this](ConnId id) {
      auto conn = conns_.find(id);
      return conn != conns_.end() && conn->second->unread() > 0;
    };
    std::vector<std::string> ids;
    for (auto& [run_id, job] : jobs_) ids.push_back(run_id);
    for (const std::string& run_id : ids) {
      auto job = jobs_.find(run_id);
      if (job != jobs_.end()) Apply(run_id, job->second->OnTick(now, unread));
    }
    Tick();
  });
}

void CoordinatorServer::ExpireJobs(Clock::time_point now) {
  if (!expire_after_) return;
  // Each job counts its own connections: O(jobs) a tick, not O(connections).
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const std::string& run_id = it->first;
    if (it->second->connections() > 0) {
      idle_since_.erase(run_id);
      ++it;
      continue;
    }
    auto [since, fresh] = idle_since_.emplace(run_id, now);
    if (fresh || now - since->second < *expire_after_) {
      ++it;
      continue;
    }
    if (log_) {
      log_(fmt::format("{}: job {} expired: no agent connected for {}", subject_, QuoteId(run_id),
                       FormatDuration(*expire_after_)));
    }
    idle_since_.erase(since);
    it = jobs_.erase(it);
  }
}

}  // namespace dlaunch::rendezvous
