#include "rendezvous/agent_session.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "rendezvous/connect_now.hpp"
#include "rendezvous/host_lookup.hpp"

namespace dlaunch::rendezvous {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

AgentSession::AgentSession(asio::io_context& io, HostPort target, AgentMachineOptions options, Hooks hooks)
    : io_(io),
      target_(std::move(target)),
      hooks_(std::move(hooks)),
      machine_(CountingPauses(std::move(options))),
      resolver_(io),
      timer_(io) {}

AgentSession::~AgentSession() {
  *alive_ = false;
  HangUp();
  timer_.cancel();
}

AgentMachineOptions AgentSession::CountingPauses(AgentMachineOptions options) {
  // The ranks' silence goes to the coordinator's hang watch, which keeps its own
  // time on an AwakeClock: the ranks could not write while the job was frozen,
  // so their silence is counted from the resume, not from before the pause.
  if (options.silence) {
    options.silence = [inner = std::move(options.silence), this] {
      Clock::time_point now = Clock::now();
      return std::chrono::duration_cast<std::chrono::milliseconds>(now - clock_.CountFrom(now - inner()));
    };
  }
  return options;
}

void AgentSession::Start() { Apply(machine_.Start(clock_.Now())); }

void AgentSession::WorkersDone(int code) {
  abort_ = nullptr;
  Apply(machine_.OnWorkersDone(code, clock_.Now()));
}

void AgentSession::Attach(std::function<void(int, const std::string&)> abort) { abort_ = std::move(abort); }

void AgentSession::Answer(int id, std::vector<std::string> items) { Apply(machine_.Answer(id, std::move(items))); }

void AgentSession::LocalFailure(int rank, int code, const std::string& reason) {
  Apply(machine_.OnWorkerFailed(rank, code, reason));
}

void AgentSession::Leave() {
  abort_ = nullptr;
  Apply(machine_.Leave());
}

void AgentSession::Apply(std::vector<AgentAction> actions) {
  for (;;) {
    if (ApplyOnce(actions)) return;  // finished
    // A connect that failed before it returned is the machine's next event,
    // now: no pass of the event loop, no deadline armed for it.
    if (!failed_now_) break;
    std::string why = std::move(*failed_now_);
    failed_now_.reset();
    actions = machine_.OnConnectFailed(why, clock_.Now());
  }
  ArmTimer();
}

bool AgentSession::ApplyOnce(std::vector<AgentAction>& actions) {
  for (AgentAction& action : actions) {
    if (std::holds_alternative<DoConnect>(action)) {
      Connect();
    } else if (auto* send = std::get_if<DoSend>(&action)) {
      if (conn_) conn_->Send(send->message);
    } else if (std::holds_alternative<DoHangUp>(action)) {
      HangUp();
    } else if (auto* run = std::get_if<DoRunWorkers>(&action)) {
      hooks_.run(run->assignment);
    } else if (auto* stop = std::get_if<DoStopWorkers>(&action)) {
      if (abort_) abort_(stop->code, stop->reason);
    } else if (auto* notice = std::get_if<DoNotice>(&action)) {
      hooks_.notice(notice->line);
    } else if (auto* query = std::get_if<DoQuery>(&action)) {
      // Answered later, from the hook's own handler: a posted answer never runs
      // inside this loop over actions.
      if (hooks_.query) {
        hooks_.query(query->id, query->what);
      } else {
        int id = query->id;
        boost::asio::post(io_, [this, id, alive = alive_] {
          if (*alive) Answer(id, {});
        });
      }
    } else if (auto* finish = std::get_if<DoFinish>(&action)) {
      timer_.cancel();
      clock_.Disarm();
      hooks_.finish(finish->code, finish->error);
      return true;  // the owner may be tearing everything down
    }
  }
  return false;
}

void AgentSession::ArmTimer() {
  std::optional<Clock::time_point> deadline = machine_.NextDeadline();
  if (!deadline) {
    timer_.cancel();
    clock_.Disarm();
    return;
  }
  timer_.expires_at(clock_.Arm(*deadline));
  timer_.async_wait([this, alive = alive_](boost::system::error_code ec) {
    if (ec || !*alive) return;
    Apply(machine_.OnTick(clock_.Now(), conn_ && conn_->unread() > 0));
  });
}

namespace {

// A connect to a port of the ephemeral range on which nothing listens yet can
// be given that very port as its own source and, by TCP's simultaneous open,
// connect to itself (Linux: 127.0.0.1:P to 127.0.0.1:P). Kept, it would read its
// own Hello ("not a dlaunch coordinator") and hold the port that the host is
// about to bind. It is a refusal: reset at once and retried.
bool ReachedItself(const tcp::socket& socket) {
  boost::system::error_code local_ec, remote_ec;
  tcp::endpoint local = socket.local_endpoint(local_ec);
  tcp::endpoint remote = socket.remote_endpoint(remote_ec);
  return !local_ec && !remote_ec && local == remote;
}

}  // namespace

void AgentSession::Connect() {
  HangUp();
  std::uint64_t attempt = ++attempt_;
  auto failed = [this, attempt, alive = alive_](const std::string& why) {
    if (!*alive || attempt != attempt_) return;
    connecting_.reset();
    Apply(machine_.OnConnectFailed(why, clock_.Now()));
  };
  // `connecting_` has connected: keep it as the connection, unless it reached itself.
  auto connected = [this, attempt, alive = alive_, failed] {
    boost::system::error_code ec;
    if (ReachedItself(*connecting_)) {
      // Reset, not closed: a TIME_WAIT of the port would keep the host from binding it.
      connecting_->set_option(asio::socket_base::linger(true, 0), ec);
      connecting_->close(ec);
      return failed("nothing listens on the port yet; the connection reached itself");
    }
    auto socket = std::move(*connecting_);
    connecting_.reset();
    conn_ = std::make_shared<Connection>(std::move(socket));
    conn_->Start(
        [this, attempt, alive](Message m) {
          if (*alive && attempt == attempt_) Apply(machine_.OnMessage(m, clock_.Now()));
        },
        [this, attempt, alive](const Status& why) {
          if (!*alive || attempt != attempt_) return;
          conn_.reset();
          Apply(machine_.OnClosed(why, clock_.Now()));
        });
    Apply(machine_.OnConnected(conn_->local_address(), clock_.Now()));
  };
  // An address needs no resolver: a thousand agents waiting for their host
  // would otherwise each wake Asio's resolver thread on every retry. Nor does
  // it need Asio to learn of a refusal the kernel already knows (connect_now.hpp).
  boost::system::error_code not_literal;
  asio::ip::address literal = asio::ip::make_address(target_.host, not_literal);
  if (!not_literal) {
    tcp::endpoint to(literal, static_cast<unsigned short>(target_.port));
    StartedConnect started = StartConnect(to);
    boost::system::error_code ec(started.error, boost::system::system_category());
    if (started.fd >= 0) {
      connecting_ = std::make_unique<tcp::socket>(io_);
      connecting_->assign(to.protocol(), started.fd, ec);
      if (ec) ::close(started.fd);
    }
    if (ec) {
      connecting_.reset();
      failed_now_ = ec.message();  // Apply hands it to the machine
      return;
    }
    connecting_->async_wait(tcp::socket::wait_write,
                            [this, attempt, alive = alive_, failed, connected](boost::system::error_code ec) {
                              if (!*alive || attempt != attempt_) return;
                              if (!ec)
                                ec.assign(ConnectError(connecting_->native_handle()), boost::system::system_category());
                              if (ec) return failed(ec.message());
                              connected();
                            });
    return;
  }
  // Resolution runs on Asio's resolver thread, so a slow DNS answer never holds the loop.
  resolver_.async_resolve(target_.host, std::to_string(target_.port),
                          [this, attempt, alive = alive_, failed, connected](boost::system::error_code ec,
                                                                             tcp::resolver::results_type results) {
                            if (!*alive || attempt != attempt_) return;
                            if (ec) {
                              Apply(machine_.OnUnresolved(fmt::format("cannot resolve {} ({}; {})", target_.host,
                                                                      ec.message(), DescribeHostLookup()),
                                                          clock_.Now()));
                              return;
                            }
                            connecting_ = std::make_unique<tcp::socket>(io_);
                            asio::async_connect(*connecting_, results,
                                                [this, attempt, alive, failed, connected](boost::system::error_code ec,
                                                                                          const tcp::endpoint&) {
                                                  if (!*alive || attempt != attempt_) return;
                                                  if (ec) return failed(ec.message());
                                                  connected();
                                                });
                          });
}

void AgentSession::HangUp() {
  ++attempt_;  // whatever the old attempt still reports is stale now
  resolver_.cancel();
  if (connecting_) {
    boost::system::error_code ignored;
    connecting_->close(ignored);
    connecting_.reset();
  }
  if (conn_) {
    conn_->Close();
    conn_.reset();
  }
}

}  // namespace dlaunch::rendezvous
