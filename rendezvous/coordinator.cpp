#include "rendezvous/coordinator.hpp"

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "rendezvous/auth.hpp"
#include "rendezvous/hang_detector.hpp"
#include "rendezvous/query_router.hpp"
#include "rendezvous/rendezvous_core.hpp"

namespace dlaunch::rendezvous {

std::string QuoteId(std::string_view text) {
  constexpr std::size_t kShown = 64;
  if (text.size() <= kShown) return fmt::format("'{}'", text);
  return fmt::format("'{}...' ({} bytes)", text.substr(0, kShown), text.size());
}

Result<Challenge> AnswerHello(const std::string& token, const std::string& run_id, const Hello& hello,
                              const std::function<Result<std::string>()>& nonce_source, HandshakeState& state) {
  auto bad = [](std::string msg) { return Status::InvalidArgument(std::move(msg)); };
  if (hello.version != kProtocolVersion) {
    return bad(fmt::format("protocol version {} is not supported (this coordinator speaks {})", hello.version,
                           kProtocolVersion));
  }
  if (hello.run_id != run_id) {
    return bad(fmt::format("run id {} is not this job's ({})", QuoteId(hello.run_id), QuoteId(run_id)));
  }
  if (token.empty()) return Challenge{};
  if (hello.nonce.empty()) return bad("this job needs a token, and the agent has none");
  if (hello.nonce.size() != kNonceSize) {
    return bad(fmt::format("hello nonce of {} bytes (expected {})", hello.nonce.size(), kNonceSize));
  }
  Result<std::string> nonce = nonce_source ? nonce_source() : RandomNonce();
  if (!nonce.ok()) return nonce.status();
  state.nonce_agent = hello.nonce;
  state.nonce_coordinator = *nonce;
  return Challenge{*nonce, ProofFor(token, Prover::kCoordinator, hello.nonce, *nonce, run_id)};
}

Status CheckProof(const std::string& token, const std::string& run_id, const HandshakeState& state,
                  const Proof& proof) {
  if (!Verify(token, Prover::kAgent, state.nonce_agent, state.nonce_coordinator, run_id, proof.mac)) {
    return Status::InvalidArgument("wrong token (proof does not match)");
  }
  return Status::Ok();
}

std::string JoinProblem(const Join& join, const std::string& run_id) {
  if (join.run_id != run_id)
    return fmt::format("run id {} is not this job's ({})", QuoteId(join.run_id), QuoteId(run_id));
  if (join.host.empty()) return "join without a host name";
  if (join.host.size() > kMaxHostLength) {
    return fmt::format("join: host name of {} bytes (at most {})", join.host.size(), kMaxHostLength);
  }
  std::string from = fmt::format("join from host '{}'", join.host);
  if (join.addrs.empty()) return from + ": no address";
  for (const std::string& addr : join.addrs) {
    if (addr.empty() || addr.size() > kMaxHostLength) {
      return fmt::format("{}: address of {} bytes (expected 1 to {})", from, addr.size(), kMaxHostLength);
    }
  }
  if (join.nproc < 1) return fmt::format("{}: nproc {} is below 1", from, join.nproc);
  if (join.nproc > kMaxNprocPerNode) {
    return fmt::format("{}: nproc {} is over the cap of {}", from, join.nproc, kMaxNprocPerNode);
  }
  if (join.gpus < 0) return fmt::format("{}: gpus {} is negative", from, join.gpus);
  if (join.wants_table != 0 && join.wants_table != 1)
    return fmt::format("{}: wants_table {} is not 0 or 1", from, join.wants_table);
  if (join.master_port_hint < 0 || join.master_port_hint > 65535) {
    return fmt::format("{}: master port hint {} is outside 0..65535", from, join.master_port_hint);
  }
  if (!join.task_ports.empty() && join.task_ports.size() != static_cast<std::size_t>(join.nproc)) {
    return fmt::format("{}: {} task ports for {} processes", from, join.task_ports.size(), join.nproc);
  }
  for (int port : join.task_ports) {
    if (port < 1 || port > 65535) return fmt::format("{}: task port {} is outside 1..65535", from, port);
  }
  return "";
}

Status Validate(const CoordinatorOptions& o) {
  auto bad = [](std::string msg) { return Status::InvalidArgument(std::move(msg)); };
  if (o.run_id.empty()) return bad("--rdzv-id: empty run id");
  if (o.min_nodes < 1) return bad(fmt::format("--nnodes: minimum {} is below 1", o.min_nodes));
  if (o.max_nodes < o.min_nodes) {
    return bad(fmt::format("--nnodes: minimum {} is above maximum {}", o.min_nodes, o.max_nodes));
  }
  for (auto [name, d] : {std::pair{"join_timeout", o.join_timeout},
                         {"last_call_timeout", o.last_call_timeout},
                         {"heartbeat_timeout", o.heartbeat_timeout},
                         {"handshake_timeout", o.handshake_timeout}}) {
    if (d.count() <= 0) return bad(fmt::format("--rdzv-conf {}: {} is not positive", name, FormatDuration(d)));
  }
  if (o.max_restarts < 0) return bad(fmt::format("--max-restarts: {} is negative", o.max_restarts));
  if (o.spares < 0 || o.spares > kMaxSpares) {
    return bad(fmt::format("--spares: {} is outside 0..{}", o.spares, kMaxSpares));
  }
  if (o.max_no_progress_restarts < -1) {
    return bad(fmt::format("--max-no-progress-restarts: {} is below -1 (off)", o.max_no_progress_restarts));
  }
  if (o.backoff_min.count() < 0 || o.backoff_max < o.backoff_min) {
    return bad(fmt::format("--restart-backoff: {}:{} is not MIN:MAX with 0 <= MIN <= MAX",
                           FormatDuration(o.backoff_min), FormatDuration(o.backoff_max)));
  }
  if (o.master_port < 0 || o.master_port > 65535) {
    return bad(fmt::format("--master-port: {} is outside 0..65535", o.master_port));
  }
  if (!o.node_list.empty() && o.node_list.size() != static_cast<std::size_t>(o.max_nodes)) {
    return bad(fmt::format("--nodes: {} hosts, but --nnodes allows {}", o.node_list.size(), o.max_nodes));
  }
  if (o.hang_timeout.count() < 0)
    return bad(fmt::format("--hang-timeout: {} is negative", FormatDuration(o.hang_timeout)));
  return Status::Ok();
}

std::string FormatDuration(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{}s", d.count() / 1000);
  return fmt::format("{}ms", d.count());
}

// The core tells the detector and the router what happens to the generation;
// the coordinator's own calls go to the part they concern.
struct Coordinator::Parts final : CoreListener {
  explicit Parts(CoordinatorOptions options)
      : hangs(Subject(options), options.hang_timeout),
        router(Subject(options), options.hang_stop),
        core(std::move(options), *this) {}

  static std::string Subject(const CoordinatorOptions& o) {
    return o.endpoint.empty() ? "rendezvous" : "rendezvous " + o.endpoint;
  }

  std::vector<Action> OnGeneration(const std::vector<ConnId>& conns, const std::vector<envmap::Node>& table,
                                   Clock::time_point now) override {
    hangs.OnGeneration(table, now);
    return router.OnGeneration(conns, table);
  }
  std::vector<Action> OnHeartbeat(int node_rank, const Heartbeat& beat, Clock::time_point now) override {
    return hangs.OnHeartbeat(node_rank, beat.silent_ms, now);
  }
  std::vector<Action> OnReport(ConnId conn, const std::string& name, const Report& report) override {
    return router.OnReport(conn, name, report);
  }
  std::vector<Action> OnNodeDone(ConnId conn, int node_rank, Clock::time_point now) override {
    hangs.OnNodeFinished(node_rank, now);
    return router.OnNodeDone(conn);
  }
  std::vector<Action> OnNodeGone(ConnId conn, int node_rank, const std::string& what, Clock::time_point now) override {
    hangs.OnNodeFinished(node_rank, now);
    return router.OnNodeGone(conn, what);
  }
  std::vector<Action> OnTick(Clock::time_point now) override {
    std::vector<Action> out = router.OnTick(now);
    bool stops = std::any_of(out.begin(), out.end(), [](const Action& a) {
      const auto* report = std::get_if<HangReport>(&a);
      return report && report->stop;
    });
    if (stops || router.hang_open()) return out;  // the job ends, or its silence is being looked at
    if (std::optional<std::chrono::milliseconds> silent = hangs.Check()) {
      for (Action& action : router.AskForHang(*silent, now)) out.push_back(std::move(action));
    }
    return out;
  }
  std::vector<Action> OnStandby() override {
    hangs.OnJobEnd();
    return router.OnStandby();
  }
  std::vector<Action> OnJobEnd() override {
    hangs.OnJobEnd();
    return router.OnJobEnd();
  }

  HangDetector hangs;
  QueryRouter router;
  RendezvousCore core;  // last: it calls the others
};

bool ExpandWrites(const Action& action, const std::function<void(const Action&)>& each) {
  if (std::holds_alternative<Send>(action) || std::holds_alternative<Close>(action)) {
    each(action);
    return true;
  }
  if (const auto* many = std::get_if<SendAssignments>(&action)) {
    for (const SendAssignments::To& to : many->to)
      each(Send{to.conn, AssignmentFor(*many->generation, to.node_rank, to.wants_table)});
    return true;
  }
  const auto* bye = std::get_if<Farewell>(&action);
  if (bye == nullptr) return false;
  for (const Farewell::To& to : bye->to) {
    if (to.last) each(Send{to.conn, bye->last(to.node_rank)});
    each(Close{to.conn, bye->reason});
  }
  return true;
}

Coordinator::Coordinator(CoordinatorOptions options) : parts_(std::make_unique<Parts>(std::move(options))) {}
Coordinator::Coordinator(Coordinator&&) noexcept = default;
Coordinator& Coordinator::operator=(Coordinator&&) noexcept = default;
Coordinator::~Coordinator() = default;

std::vector<Action> Coordinator::OnConnect(ConnId conn, std::string peer, Clock::time_point now) {
  return parts_->core.OnConnect(conn, std::move(peer), now);
}
std::vector<Action> Coordinator::OnAuthenticated(ConnId conn, std::string peer, Clock::time_point now) {
  return parts_->core.OnAuthenticated(conn, std::move(peer), now);
}
std::vector<Action> Coordinator::OnMessage(ConnId conn, const Message& message, Clock::time_point now) {
  return parts_->core.OnMessage(conn, message, now);
}
std::vector<Action> Coordinator::OnDisconnect(ConnId conn, Clock::time_point now) {
  return parts_->core.OnDisconnect(conn, now);
}
std::vector<Action> Coordinator::OnProtocolError(ConnId conn, const Status& error, Clock::time_point now) {
  return parts_->core.OnProtocolError(conn, error, now);
}
std::vector<Action> Coordinator::OnTick(Clock::time_point now, const UnreadInput& unread) {
  return parts_->core.OnTick(now, unread);
}
std::vector<Action> Coordinator::AbortJob(int code, const std::string& cause) {
  return parts_->core.AbortJob(code, cause);
}
std::vector<Action> Coordinator::Ask(std::uint64_t tag, const std::string& what, std::chrono::milliseconds timeout,
                                     Clock::time_point now) {
  return parts_->router.Ask(tag, what, timeout, now);
}

std::optional<Clock::time_point> Coordinator::NextDeadline() const {
  std::optional<Clock::time_point> core = parts_->core.NextDeadline();
  std::optional<Clock::time_point> queries = parts_->router.NextDeadline();
  if (core && queries) return std::min(*core, *queries);
  return core ? core : queries;
}

Coordinator::State Coordinator::state() const { return parts_->core.state(); }
int Coordinator::generation() const { return parts_->core.generation(); }
int Coordinator::restart_count() const { return parts_->core.restart_count(); }
const std::vector<envmap::Node>& Coordinator::nodes() const { return parts_->core.nodes(); }
std::size_t Coordinator::connections() const { return parts_->core.connections(); }

}  // namespace dlaunch::rendezvous
