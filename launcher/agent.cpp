#include "launcher/agent.hpp"

#include <fmt/format.h>

#include "rendezvous/auth.hpp"

namespace dlaunch::launcher {

namespace asio = boost::asio;
namespace rdzv = dlaunch::rendezvous;
using Clock = std::chrono::steady_clock;

Agent::Agent(asio::io_context& io, AgentOptions options)
    : io_(io), options_(std::move(options)), heartbeat_timer_(io) {}

Agent::~Agent() {
  heartbeat_timer_.cancel();
  if (conn_) conn_->Close();
}

Result<rdzv::Assignment> Agent::WaitAssignment() {
  if (!conn_) {
    Result<asio::ip::tcp::socket> socket = rdzv::ConnectWithRetry(io_, options_.endpoint, options_.join_timeout);
    if (!socket.ok()) return socket.status();
    conn_ = std::make_shared<rdzv::Connection>(std::move(*socket));
    conn_->Start([this](rdzv::Message m) { OnMessage(std::move(m)); },
                 [this](const Status& why) { OnLost(why.message()); });
    if (!options_.token.empty()) {
      Result<std::string> nonce = rdzv::RandomNonce();
      if (!nonce.ok()) return nonce.status();
      nonce_ = *nonce;
    }
    rdzv::Hello hello{rdzv::kProtocolVersion, options_.join.run_id, nonce_, options_.min_nodes,
                      options_.max_nodes, options_.max_restarts};
    // The encoder never truncates: a run id or address over its cap is an error here.
    for (const rdzv::Message& m : {rdzv::Message(hello), rdzv::Message(options_.join)})
      if (Status s = rdzv::CheckEncodable(m); !s.ok()) return Status::InvalidArgument(Subject() + ": " + s.message());
    conn_->Send(hello);
    last_heard_ = Clock::now();
    ArmHeartbeat();
  }
  if (!restart_pending_) assignment_.reset();  // a restart's assignment is already here
  restart_pending_ = false;
  abort_ = nullptr;
  finish_ = nullptr;
  io_.restart();
  while (!assignment_ && !join_error_ && io_.run_one() > 0) {
  }
  if (join_error_) return *join_error_;
  if (!assignment_) return Status::PeerLost(Subject() + ": the event loop ran dry before an assignment");
  generation_ = assignment_->generation;
  node_rank_ = assignment_->node_rank;
  return *assignment_;
}

void Agent::OnMessage(rdzv::Message message) {
  last_heard_ = Clock::now();
  if (auto* c = std::get_if<rdzv::Challenge>(&message)) {
    // Mutual authentication: with a token, nothing goes out (and no Assignment is
    // believed) until the coordinator has proven it holds the token too.
    if (!options_.token.empty()) {
      Status proven = rdzv::CheckCoordinatorProof(options_.token, nonce_, c->nonce, options_.join.run_id, c->proof);
      if (!proven.ok()) {
        join_error_ = Status::InvalidArgument(
            fmt::format("{}: the coordinator did not prove it holds the token ({})", Subject(), proven.message()));
        conn_->Close();
        return;
      }
    }
    challenged_ = true;
    if (!c->nonce.empty()) {
      if (options_.token.empty()) {
        join_error_ = Status::InvalidArgument(Subject() + ": the coordinator wants a token (--rdzv-token, " +
                                              rdzv::kTokenEnvVar + " or --rdzv-token-file)");
        conn_->Close();
        return;
      }
      conn_->Send(rdzv::Proof{rdzv::ProofFor(options_.token, rdzv::Prover::kAgent, nonce_, c->nonce, options_.join.run_id)});
    }
    // Without --local-addr, advertise the address this host reaches the coordinator from.
    if (options_.join.addrs.empty()) options_.join.addrs.push_back(conn_->local_address());
    conn_->Send(options_.join);
  } else if (auto* a = std::get_if<rdzv::Assignment>(&message)) {
    if (!challenged_ && !options_.token.empty()) {
      join_error_ = Status::InvalidArgument(fmt::format(
          "{}: the coordinator did not prove it holds the token (an assignment before any challenge)", Subject()));
      conn_->Close();
      return;
    }
    bool running = abort_ && !pending_exit_;
    assignment_ = std::move(*a);
    if (running || (abort_ && finish_)) {
      // A new generation while this one runs: the coordinator restarts the job.
      restart_pending_ = true;
      pending_exit_ = 1;
      if (!aborted_) {
        aborted_ = true;
        abort_(1, fmt::format("{}: restarting the job as generation {}", Subject(), assignment_->generation));
      }
      if (finish_) finish_(1);
    }
  } else if (auto* r = std::get_if<rdzv::Refused>(&message)) {
    join_error_ = Status::InvalidArgument(fmt::format("{}: refused ({})", Subject(), r->reason));
  } else if (auto* ab = std::get_if<rdzv::Abort>(&message)) {
    if (abort_ && !aborted_) {
      aborted_ = true;
      abort_(ab->code, options_.quiet_abort ? "" : ab->reason);
    } else if (!abort_) {
      join_error_ = Status::PeerLost(ab->reason);
    }
    pending_exit_ = ab->code;
    if (finish_) finish_(ab->code);
  } else if (auto* d = std::get_if<rdzv::Done>(&message)) {
    pending_exit_ = d->exit_code;
    if (finish_) finish_(d->exit_code);
  }
  // Heartbeat: being heard is all it says.
}

void Agent::OnLost(const std::string& why) {
  std::string reason = fmt::format("{}: lost the coordinator ({})", Subject(), why);
  if (!assignment_ && !abort_) {
    if (!join_error_) join_error_ = Status::PeerLost(reason);
    return;
  }
  if (pending_exit_) return;  // the job had already ended
  pending_exit_ = 1;
  if (abort_ && !aborted_) {
    aborted_ = true;
    abort_(1, reason);
  }
  if (finish_) finish_(1);
}

void Agent::ArmHeartbeat() {
  heartbeat_timer_.expires_after(options_.heartbeat_interval);
  heartbeat_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || !conn_ || !conn_->open()) return;
    if (Clock::now() - last_heard_ > options_.heartbeat_timeout) {
      conn_->Close();
      OnLost(fmt::format("nothing heard for {:.1f}s",
                         std::chrono::duration<double>(options_.heartbeat_timeout).count()));
      return;
    }
    conn_->Send(rdzv::Heartbeat{});
    ArmHeartbeat();
  });
}

void Agent::Attach(std::function<void(int, const std::string&)> abort) {
  abort_ = std::move(abort);
  aborted_ = false;
  finish_ = nullptr;
  pending_exit_.reset();
}

void Agent::LocalFailure(int rank, int code, const std::string& reason) {
  if (conn_ && conn_->open()) conn_->Send(rdzv::WorkerFailed{generation_, node_rank_, rank, code, reason});
}

void Agent::LocalDone(int code, std::function<void(int)> finish) {
  if (pending_exit_) {
    finish(code != 0 ? code : *pending_exit_);
    return;
  }
  finish_ = [this, code, finish = std::move(finish)](int job_code) {
    // Clearing finish_ destroys this lambda: copy what it needs first.
    int own = code;
    auto done = std::move(finish);
    finish_ = nullptr;
    // A node whose own workers failed exits with its own code; the others take the job's.
    done(own != 0 ? own : job_code);
  };
  if (conn_ && conn_->open()) conn_->Send(rdzv::Done{generation_, node_rank_, code});
}

}  // namespace dlaunch::launcher
