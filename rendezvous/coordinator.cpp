#include "rendezvous/coordinator.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "rendezvous/auth.hpp"
#include "rendezvous/ranks.hpp"

namespace dlaunch::rendezvous {
namespace {

// Kinds of log lines that peers can repeat at will (Log::limit).
constexpr const char* kLimitClosed = "closed connections";
constexpr const char* kLimitIgnored = "ignored messages";
constexpr const char* kLimitNumbers = "messages with a bad number";

std::string JoinProblem(const Join& join, const std::string& run_id) {
  if (join.run_id != run_id) return fmt::format("run id {} is not this job's ({})", QuoteId(join.run_id), QuoteId(run_id));
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
  if (join.wants_table != 0 && join.wants_table != 1) return fmt::format("{}: wants_table {} is not 0 or 1", from, join.wants_table);
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

}  // namespace

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
  if (o.master_port < 0 || o.master_port > 65535) {
    return bad(fmt::format("--master-port: {} is outside 0..65535", o.master_port));
  }
  if (!o.node_list.empty() && o.node_list.size() != static_cast<std::size_t>(o.max_nodes)) {
    return bad(fmt::format("--nodes: {} hosts, but --nnodes allows {}", o.node_list.size(), o.max_nodes));
  }
  if (o.hang_timeout.count() < 0) return bad(fmt::format("--hang-timeout: {} is negative", FormatDuration(o.hang_timeout)));
  return Status::Ok();
}

std::string FormatDuration(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{}s", d.count() / 1000);
  return fmt::format("{}ms", d.count());
}

Coordinator::Coordinator(CoordinatorOptions options) : options_(std::move(options)) {
  if (!options_.nonce_source) options_.nonce_source = RandomNonce;
}

std::string Coordinator::Subject() const {
  return options_.endpoint.empty() ? "rendezvous" : "rendezvous " + options_.endpoint;
}

std::string Coordinator::NodeName(const Agent& agent) const {
  if (agent.node_rank >= 0) return fmt::format("node {} ({})", agent.node_rank, agent.join.host);
  return fmt::format("host '{}'", agent.join.host);
}

std::vector<Action> Coordinator::OnConnect(ConnId conn, std::string peer, Clock::time_point now) {
  if (state_ == State::kEnded) {
    std::string problem = fmt::format("job '{}' has ended", options_.run_id);
    Emit(Send{conn, Refused{Subject() + ": " + problem}});
    Emit(Close{conn, problem});
    Emit(Log{fmt::format("{}: closed {}: {}", Subject(), peer, problem), kLimitClosed});
    return Flush();
  }
  Agent& agent = agents_[conn];
  agent.peer = std::move(peer);
  agent.connected = now;
  agent.last_seen = now;
  return Flush();
}

std::vector<Action> Coordinator::OnAuthenticated(ConnId conn, std::string peer, Clock::time_point now) {
  std::vector<Action> actions = OnConnect(conn, std::move(peer), now);
  if (auto it = agents_.find(conn); it != agents_.end()) it->second.phase = Phase::kJoin;
  return actions;
}

std::vector<Action> Coordinator::OnMessage(ConnId conn, const Message& message, Clock::time_point now) {
  auto it = agents_.find(conn);
  if (it == agents_.end()) return Flush();  // already closed by us, or the job ended
  Agent& agent = it->second;
  agent.last_seen = now;
  const Phase phase = agent.phase;
  bool joined = phase == Phase::kWaiting || phase == Phase::kAssigned;

  if (auto* m = std::get_if<Hello>(&message); m && phase == Phase::kHello) {
    OnHello(conn, agent, *m, now);
  } else if (auto* m = std::get_if<Proof>(&message); m && phase == Phase::kProof) {
    OnProof(conn, agent, *m, now);
  } else if (auto* m = std::get_if<Join>(&message); m && phase == Phase::kJoin) {
    OnJoin(conn, agent, *m, now);
  } else if (auto* m = std::get_if<Heartbeat>(&message); m && joined) {
    OnHeartbeat(agent, *m, now);
    Emit(Send{conn, Heartbeat{}});
  } else if (std::holds_alternative<Leave>(message) && joined) {
    CloseConn(conn, "left");
    Remove(conn, "left", now);
  } else if (auto* m = std::get_if<WorkerFailed>(&message); m && phase == Phase::kAssigned) {
    OnWorkerFailed(agent, *m, now);
  } else if (auto* m = std::get_if<Done>(&message); m && phase == Phase::kAssigned) {
    OnDone(conn, agent, *m, now);
  } else if (auto* m = std::get_if<Report>(&message); m && joined) {
    OnReport(conn, agent, *m);
  } else {
    static constexpr const char* kWhere[] = {"before the hello", "before the proof", "before the join",
                                             "while waiting for an assignment", "from an assigned node"};
    bool coordinator_only = std::holds_alternative<Challenge>(message) ||
                            std::holds_alternative<Assignment>(message) ||
                            std::holds_alternative<Abort>(message) || std::holds_alternative<Refused>(message) ||
                            std::holds_alternative<Query>(message);
    std::string problem = fmt::format("unexpected {} {}", TypeName(message),
                                      coordinator_only ? "from an agent" : kWhere[static_cast<int>(phase)]);
    Refuse(conn, problem, now);
  }
  return Flush();
}

void Coordinator::OnHello(ConnId conn, Agent& agent, const Hello& hello, Clock::time_point now) {
  Result<Challenge> challenge = AnswerHello(options_.token, options_.run_id, hello, options_.nonce_source,
                                            agent.handshake);
  if (!challenge.ok()) return Refuse(conn, challenge.status().message(), now);
  agent.phase = options_.token.empty() ? Phase::kJoin : Phase::kProof;
  Emit(Send{conn, *challenge});
}

void Coordinator::OnProof(ConnId conn, Agent& agent, const Proof& proof, Clock::time_point now) {
  if (Status s = CheckProof(options_.token, options_.run_id, agent.handshake, proof); !s.ok()) {
    return Refuse(conn, s.message(), now);
  }
  agent.phase = Phase::kJoin;
}

void Coordinator::OnJoin(ConnId conn, Agent& agent, const Join& join, Clock::time_point now) {
  if (std::string problem = JoinProblem(join, options_.run_id); !problem.empty()) {
    return Refuse(conn, problem, now);
  }
  if (state_ == State::kRunning && options_.min_nodes == options_.max_nodes) {
    return Refuse(conn, fmt::format("job '{}' is already running on {} of {} nodes", options_.run_id,
                                    table_.size(), options_.max_nodes), now);
  }
  Result<int> slot = ClaimSlot(join, options_.node_list, options_.max_nodes, slots_);
  if (!slot.ok()) return Refuse(conn, slot.status().message(), now);

  agent.join = join;
  agent.slot = *slot;
  agent.arrival = arrivals_++;
  agent.phase = Phase::kWaiting;
  ++waiting_;
  if (agent.slot >= 0) slots_[agent.slot] = join.host;
  if (state_ == State::kRunning) {
    Emit(Log{fmt::format("{}: host '{}' joined late; it waits for the next generation", Subject(), join.host),
             "late joins"});
    return;
  }
  if (!join_deadline_) join_deadline_ = now + options_.join_timeout;
  UpdateGathering(now);
}

void Coordinator::UpdateGathering(Clock::time_point now) {
  if (state_ != State::kGathering) return;
  int waiting = waiting_;
  if (waiting == 0) {
    join_deadline_.reset();
    last_call_deadline_.reset();
  } else if (waiting >= options_.max_nodes) {
    Assign(now);
  } else if (waiting < options_.min_nodes) {
    last_call_deadline_.reset();
  } else if (!last_call_deadline_) {
    last_call_deadline_ = now + options_.last_call_timeout;
    Emit(Log{fmt::format("{}: {} of {}..{} nodes joined; last call for {}", Subject(), waiting,
                         options_.min_nodes, options_.max_nodes, FormatDuration(options_.last_call_timeout)),
             "last calls"});
  }
}

void Coordinator::Assign(Clock::time_point now) {
  // The nodes of the last generation still here keep their place ahead of late
  // joiners; within each group, arrival order.
  std::vector<std::pair<ConnId, const Agent*>> members;
  for (Phase phase : {Phase::kAssigned, Phase::kWaiting}) {
    std::size_t first = members.size();
    for (const auto& [id, agent] : agents_)
      if (agent.phase == phase) members.emplace_back(id, &agent);
    std::sort(members.begin() + static_cast<std::ptrdiff_t>(first), members.end(),
              [](const auto& a, const auto& b) { return a.second->arrival < b.second->arrival; });
  }
  if (members.size() > static_cast<std::size_t>(options_.max_nodes)) {
    members.resize(static_cast<std::size_t>(options_.max_nodes));
  }
  if (members.empty()) return;

  std::vector<RankClaim> claims;
  for (const auto& [id, agent] : members) claims.push_back({agent->slot, agent->arrival});
  std::vector<int> ranks = NodeRanks(claims);

  table_.assign(members.size(), envmap::Node{});
  const Agent* node0 = nullptr;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const Join& join = members[i].second->join;
    table_[static_cast<std::size_t>(ranks[i])] =
        envmap::Node{join.host, join.addrs.front(), join.nproc, join.task_ports};
    if (ranks[i] == 0) node0 = members[i].second;
  }
  Assignment assignment;
  assignment.generation = ++generation_;
  assignment.nodes = table_;
  assignment.master_addr = table_.front().addr;
  assignment.master_port = options_.master_port;
  if (assignment.master_port == 0) assignment.master_port = node0->join.master_port_hint;
  if (assignment.master_port == 0) assignment.master_port = kDefaultMasterPort;
  assignment.run_id = options_.run_id;
  assignment.restart_count = restart_count_;
  // Each Join's nproc is capped, but the sum of many is not: refuse a world size
  // that would overflow the int fields of Assignment and WORLD_SIZE.
  std::int64_t total = 0;
  for (const envmap::Node& node : table_) total += node.nproc;
  if (total > std::numeric_limits<std::int32_t>::max()) {
    std::string why = fmt::format("{}: {} nodes ask for {} workers in all, over the cap of {}", Subject(),
                                  table_.size(), total, std::numeric_limits<std::int32_t>::max());
    return End(1, why, [&](const Agent&) { return Message(Abort{why, 1}); });
  }
  // Only agents that asked for the whole table receive it.
  bool any_table = std::any_of(members.begin(), members.end(), [](const auto& m) { return m.second->join.wants_table; });
  if (std::size_t size = PayloadSize(assignment); any_table && size > kMaxPayload) {
    std::string why = fmt::format("{}: the node table of {} nodes takes {} bytes, over the frame cap of {}",
                                  Subject(), table_.size(), size, kMaxPayload);
    return End(1, why, [&](const Agent&) { return Message(Abort{why, 1}); });
  }

  state_ = State::kRunning;
  join_deadline_.reset();
  last_call_deadline_.reset();
  // A new generation is new progress: whatever hang was being looked at is gone,
  // and what was asked of the last generation's ranks has no answer to wait for.
  FinishAllQueries("a new generation began before it answered");
  hang_mark_.reset();
  int workers = 0;
  for (const envmap::Node& node : table_) workers += node.nproc;
  Emit(Log{fmt::format("{}: generation {}: {} nodes, {} workers, master {}:{}, restart {} of {}", Subject(),
                       generation_, table_.size(), workers, assignment.master_addr, assignment.master_port,
                       restart_count_, options_.max_restarts)});
  std::vector<int> offsets(table_.size() + 1, 0);
  for (std::size_t r = 0; r < table_.size(); ++r) offsets[r + 1] = offsets[r] + table_[r].nproc;
  assignment.nnodes = static_cast<int>(table_.size());
  assignment.world_size = workers;
  // Agents that asked for no table get their own row only: O(n) bytes in all
  // rather than O(n^2).
  Assignment compact = assignment;
  compact.nodes.clear();
  for (std::size_t i = 0; i < members.size(); ++i) {
    Agent& agent = agents_.at(members[i].first);
    if (agent.phase == Phase::kWaiting) --waiting_;
    agent.phase = Phase::kAssigned;
    agent.node_rank = ranks[i];
    agent.done = false;
    agent.assigned_at = now;
    agent.beat_at.reset();
    Assignment& out = agent.join.wants_table ? assignment : compact;
    out.node_rank = ranks[i];
    out.rank_offset = offsets[static_cast<std::size_t>(ranks[i])];
    if (!agent.join.wants_table) out.nodes = {table_[static_cast<std::size_t>(ranks[i])]};
    Emit(Send{members[i].first, out});
  }
}

void Coordinator::OnWorkerFailed(Agent& agent, const WorkerFailed& failed, Clock::time_point now) {
  if (failed.generation != generation_) {
    Emit(Log{fmt::format("{}: ignoring a worker failure of generation {} from {} (now {})", Subject(),
                         failed.generation, NodeName(agent), generation_), kLimitIgnored});
    return;
  }
  // The code becomes every dlaunch's exit status, and one outside 1..255 wraps
  // (256 would exit 0); the rank is named on the host's console.
  int code = failed.code != 0 ? failed.code : 1;
  if (code < 1 || code > 255) {
    Emit(Log{fmt::format("{}: {} says a worker failed with code {}; counting 1", Subject(), NodeName(agent),
                         failed.code), kLimitNumbers});
    code = 1;
  }
  int first = 0, count = 0;
  for (int r = 0; r < agent.node_rank && r < static_cast<int>(table_.size()); ++r)
    first += table_[static_cast<std::size_t>(r)].nproc;
  if (agent.node_rank < static_cast<int>(table_.size())) count = table_[static_cast<std::size_t>(agent.node_rank)].nproc;
  std::string rank = fmt::format("rank {}", failed.rank);
  if (failed.rank < first || failed.rank - first >= count) {
    Emit(Log{fmt::format("{}: {} says rank {} failed, which is not one of its ranks {}-{}", Subject(),
                         NodeName(agent), failed.rank, first, first + count - 1), kLimitNumbers});
    rank = "a rank";
  }
  std::string how = failed.reason.empty() ? fmt::format("failed with code {}", code) : failed.reason;
  Fail(fmt::format("{} {} {}", NodeName(agent), rank, how), code, false, now);
}

void Coordinator::OnDone(ConnId conn, Agent& agent, const Done& done, Clock::time_point now) {
  if (done.generation != generation_) {
    Emit(Log{fmt::format("{}: ignoring done of generation {} from {} (now {})", Subject(), done.generation,
                         NodeName(agent), generation_), kLimitIgnored});
    return;
  }
  if (done.exit_code != 0) {
    int code = done.exit_code;
    if (code < 1 || code > 255) {  // as a worker failure's code
      Emit(Log{fmt::format("{}: {} says it finished with exit code {}; counting 1", Subject(), NodeName(agent),
                           done.exit_code), kLimitNumbers});
      code = 1;
    }
    return Fail(fmt::format("{} finished with exit code {}", NodeName(agent), code), code, false, now);
  }
  agent.done = true;
  // Its ranks have finished: there is nothing left of it to sample.
  std::vector<int> answered;
  for (auto& [id, q] : queries_) {
    if (q.asked.erase(conn) == 0) continue;
    q.nodes[agent.node_rank].problem = "its ranks finished before it answered";
    if (q.asked.empty()) answered.push_back(id);
  }
  for (int id : answered)
    if (queries_.count(id)) FinishQuery(id);  // a hang stop may have ended the job
  if (state_ == State::kEnded) return;
  if (state_ != State::kRunning) return;
  for (const auto& [id, other] : agents_)
    if (other.phase == Phase::kAssigned && !other.done) return;
  int workers = 0;
  for (const envmap::Node& node : table_) workers += node.nproc;
  std::string summary = fmt::format("{}: job '{}' finished on {} nodes ({} workers, generation {})", Subject(),
                                    options_.run_id, table_.size(), workers, generation_);
  int generation = generation_;
  End(0, summary, [generation](const Agent& a) { return Message(Done{generation, a.node_rank, 0}); });
}

void Coordinator::Fail(const std::string& cause, int code, bool node_lost, Clock::time_point now) {
  std::string reason = Subject() + ": " + cause;
  int remaining = 0;
  for (const auto& [id, agent] : agents_)
    remaining += agent.phase == Phase::kAssigned || agent.phase == Phase::kWaiting ? 1 : 0;
  remaining = std::min(remaining, options_.max_nodes);
  bool elastic = options_.min_nodes < options_.max_nodes;
  if (restart_count_ < options_.max_restarts && (!node_lost || elastic) && remaining >= options_.min_nodes) {
    ++restart_count_;
    Emit(Log{fmt::format("{}; restarting ({} of {})", reason, restart_count_, options_.max_restarts)});
    return Assign(now);
  }
  End(code, reason, [&](const Agent&) { return Message(Abort{reason, code}); });
}

std::vector<Action> Coordinator::AbortJob(int code, const std::string& cause) {
  if (state_ == State::kEnded) return {};
  std::string reason = Subject() + ": " + cause;
  End(code, reason, [&](const Agent&) { return Message(rendezvous::Abort{reason, code}); });
  return Flush();
}

void Coordinator::End(int code, const std::string& summary,
                      const std::function<Message(const Agent&)>& last) {
  for (const auto& [id, agent] : agents_) {
    if (agent.phase == Phase::kWaiting || agent.phase == Phase::kAssigned) Emit(Send{id, last(agent)});
    Emit(Close{id, "job ended"});
  }
  agents_.clear();
  slots_.clear();
  waiting_ = 0;
  FinishAllQueries("the job ended before it answered");
  state_ = State::kEnded;
  join_deadline_.reset();
  last_call_deadline_.reset();
  Emit(Log{summary});
  Emit(JobEnded{code, summary});
}

void Coordinator::Refuse(ConnId conn, const std::string& problem, Clock::time_point now) {
  Emit(Send{conn, Refused{Subject() + ": " + problem}});
  CloseConn(conn, problem);
  Remove(conn, fmt::format("lost ({})", problem), now);
}

void Coordinator::CloseConn(ConnId conn, const std::string& problem) {
  Emit(Close{conn, problem});
  Emit(Log{fmt::format("{}: closed {}: {}", Subject(), agents_.at(conn).peer, problem), kLimitClosed});
}

void Coordinator::Remove(ConnId conn, const std::string& what, Clock::time_point now) {
  auto it = agents_.find(conn);
  if (it == agents_.end()) return;
  Agent agent = std::move(it->second);
  agents_.erase(it);
  // An on-demand query goes on without it; the hang query waits for its deadline.
  std::vector<int> answered;
  for (auto& [id, q] : queries_) {
    if (q.hang || q.asked.erase(conn) == 0) continue;
    q.nodes[agent.node_rank].problem = what;
    if (q.asked.empty()) answered.push_back(id);
  }
  for (int id : answered) FinishQuery(id);
  if (agent.phase == Phase::kWaiting) --waiting_;
  if (agent.slot >= 0) slots_.erase(agent.slot);
  if (agent.phase == Phase::kAssigned && !agent.done && state_ == State::kRunning) {
    Emit(NodeLost{agent.node_rank, agent.join.host, what});
    Fail(fmt::format("{} {}", NodeName(agent), what), 1, true, now);
  } else if (agent.phase == Phase::kWaiting) {
    UpdateGathering(now);
  }
}

std::vector<Action> Coordinator::OnDisconnect(ConnId conn, Clock::time_point now) {
  Remove(conn, "lost (connection closed)", now);
  return Flush();
}

std::vector<Action> Coordinator::OnProtocolError(ConnId conn, const Status& error, Clock::time_point now) {
  if (!agents_.count(conn)) return Flush();
  CloseConn(conn, error.message());
  Remove(conn, fmt::format("lost ({})", error.message()), now);
  return Flush();
}

std::vector<Action> Coordinator::OnTick(Clock::time_point now, const UnreadInput& unread) {
  std::vector<std::pair<ConnId, std::string>> expired;
  for (auto& [id, agent] : agents_) {
    bool joined = agent.phase == Phase::kWaiting || agent.phase == Phase::kAssigned;
    if (!joined && now - agent.connected >= options_.handshake_timeout) {
      expired.emplace_back(id, fmt::format("no join within {}", FormatDuration(options_.handshake_timeout)));
    } else if (joined && now - agent.last_seen >= options_.heartbeat_timeout) {
      if (unread && unread(id)) {
        agent.last_seen = now;  // it spoke; we have not read it yet
      } else {
        expired.emplace_back(id, fmt::format("no heartbeat for {}", FormatDuration(options_.heartbeat_timeout)));
      }
    }
  }
  for (const auto& [id, problem] : expired) {
    if (!agents_.count(id)) continue;  // the job ended on an earlier one
    CloseConn(id, problem);
    Remove(id, fmt::format("lost ({})", problem), now);
  }
  if (state_ == State::kRunning) {
    std::vector<int> expired_queries;
    for (const auto& [id, q] : queries_)
      if (now >= q.deadline) expired_queries.push_back(id);
    for (int id : expired_queries)
      if (queries_.count(id)) FinishQuery(id);  // a hang stop may have ended the job
    if (state_ == State::kRunning) CheckHang(now);
  }
  if (state_ != State::kGathering) return Flush();
  if (last_call_deadline_ && now >= *last_call_deadline_) {
    Assign(now);
  } else if (join_deadline_ && now >= *join_deadline_) {
    std::vector<std::string> hosts;
    std::vector<const Agent*> waiting;
    for (const auto& [id, agent] : agents_)
      if (agent.phase == Phase::kWaiting) waiting.push_back(&agent);
    std::sort(waiting.begin(), waiting.end(), [](auto* a, auto* b) { return a->arrival < b->arrival; });
    for (const Agent* agent : waiting) hosts.push_back(agent->join.host);
    std::string reason = fmt::format("{}: timed out after {} waiting for {} of {} nodes (joined: {})", Subject(),
                                     FormatDuration(options_.join_timeout),
                                     options_.min_nodes - static_cast<int>(hosts.size()), options_.min_nodes,
                                     NameList(hosts));
    End(1, reason, [&](const Agent&) { return Message(Abort{reason, 1}); });
  }
  return Flush();
}

void Coordinator::OnHeartbeat(Agent& agent, const Heartbeat& beat, Clock::time_point now) {
  if (agent.phase != Phase::kAssigned || options_.hang_timeout.count() <= 0) return;
  int silent_ms = beat.silent_ms;
  if (silent_ms < 0) {
    Emit(Log{fmt::format("{}: {} says its ranks have been silent for {}ms; counting 0", Subject(), NodeName(agent),
                         silent_ms), "heartbeats with a negative silence"});
    silent_ms = 0;
  }
  agent.beat_at = now;
  // Never before this generation began: a beat sent before the agent heard of it
  // speaks of the last generation's ranks.
  agent.quiet_since = std::max(now - std::chrono::milliseconds(silent_ms), agent.assigned_at);
}

void Coordinator::OnReport(ConnId conn, Agent& agent, const Report& report) {
  auto ignore = [&](const std::string& why) {
    Emit(Log{fmt::format("{}: ignoring a report for query {} from {} ({})", Subject(), report.id, NodeName(agent),
                         why), kLimitIgnored});
  };
  auto open = queries_.find(report.id);
  if (open == queries_.end()) return ignore("no such query is open");
  OpenQuery& q = open->second;
  auto asked = q.asked.find(conn);
  if (asked == q.asked.end()) return ignore("it was not asked, or has answered already");
  if (report.node_rank != agent.node_rank) return ignore(fmt::format("it says it is node {}", report.node_rank));
  NodeStacks& node = q.nodes[agent.node_rank];
  if (report.items.size() > static_cast<std::size_t>(node.nproc)) {
    return ignore(fmt::format("{} items for {} ranks", report.items.size(), node.nproc));
  }
  std::size_t bytes = 0;
  for (const std::string& item : report.items) bytes += item.size();
  q.asked.erase(asked);
  if (q.bytes + bytes > kMaxHangReportBytes) {
    node.problem = fmt::format("its report of {} bytes is over the {} MiB kept for one query", bytes,
                               kMaxHangReportBytes >> 20);
  } else {
    q.bytes += bytes;
    node.answered = true;
    node.items = report.items;
  }
  if (q.asked.empty()) FinishQuery(report.id);
}

void Coordinator::CheckHang(Clock::time_point now) {
  if (options_.hang_timeout.count() <= 0 || hang_query_) return;
  std::optional<Clock::time_point> earliest_beat, latest_output;
  for (const auto& [id, agent] : agents_) {
    if (agent.phase != Phase::kAssigned || agent.done) continue;
    if (!agent.beat_at) return;  // not heard from in this generation yet
    if (!earliest_beat || *agent.beat_at < *earliest_beat) earliest_beat = agent.beat_at;
    if (!latest_output || agent.quiet_since > *latest_output) latest_output = agent.quiet_since;
  }
  if (!earliest_beat || *earliest_beat < *latest_output) return;
  auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(*earliest_beat - *latest_output);
  if (silent < options_.hang_timeout) return;
  // Once reported, only output after the reported silence counts as progress. The
  // estimates move by the heartbeats' delays, so a small move is not output.
  auto slack = std::min<std::chrono::milliseconds>(std::chrono::seconds(1), options_.hang_timeout / 2);
  if (hang_mark_ && *latest_output <= *hang_mark_ + slack) return;
  hang_mark_ = latest_output;

  int id = OpenQueryToAll("stacks", true, 0, kHangReportTimeout, now);
  hang_query_ = id;
  queries_.at(id).silent = silent;
  Emit(HangSuspected{silent, static_cast<int>(queries_.at(id).asked.size())});
}

std::vector<Action> Coordinator::Ask(std::uint64_t tag, const std::string& what, std::chrono::milliseconds timeout,
                                     Clock::time_point now) {
  std::size_t open = queries_.size() - (hang_query_ ? 1 : 0);
  if (state_ != State::kRunning) {
    Emit(QueryAnswered{tag, what, {}, "no generation is running"});
  } else if (open >= kMaxOpenQueries) {
    Emit(QueryAnswered{tag, what, {}, fmt::format("{} queries are open already", open)});
  } else {
    int id = OpenQueryToAll(what, false, tag, timeout, now);
    if (queries_.at(id).asked.empty()) FinishQuery(id);  // every node has finished
  }
  return Flush();
}

int Coordinator::OpenQueryToAll(const std::string& what, bool hang, std::uint64_t tag,
                                std::chrono::milliseconds timeout, Clock::time_point now) {
  int id = ++query_ids_;
  OpenQuery& q = queries_[id];
  q.id = id;
  q.hang = hang;
  q.tag = tag;
  q.what = what;
  q.timeout = timeout;
  q.deadline = now + timeout;
  std::vector<int> offsets(table_.size() + 1, 0);
  for (std::size_t r = 0; r < table_.size(); ++r) offsets[r + 1] = offsets[r] + table_[r].nproc;
  for (const auto& [conn, agent] : agents_) {
    if (agent.phase != Phase::kAssigned) continue;
    NodeStacks& node = q.nodes[agent.node_rank];
    node.node_rank = agent.node_rank;
    node.host = agent.join.host;
    node.first_rank = offsets[static_cast<std::size_t>(agent.node_rank)];
    node.nproc = table_[static_cast<std::size_t>(agent.node_rank)].nproc;
    if (agent.done) {
      node.problem = "its ranks have finished";
      continue;
    }
    q.asked[conn] = agent.node_rank;
    Emit(Send{conn, Query{id, what}});
  }
  // A hang query names only the nodes it asked, as before.
  if (hang)
    for (auto it = q.nodes.begin(); it != q.nodes.end();)
      it = it->second.problem.empty() ? std::next(it) : q.nodes.erase(it);
  return id;
}

void Coordinator::FinishQuery(int id, const std::string& problem) {
  auto it = queries_.find(id);
  if (it == queries_.end()) return;
  OpenQuery q = std::move(it->second);
  queries_.erase(it);
  if (q.hang) hang_query_.reset();
  for (const auto& [conn, node_rank] : q.asked)
    q.nodes[node_rank].problem = problem.empty() ? fmt::format("no answer within {}", FormatDuration(q.timeout)) : problem;
  std::vector<NodeStacks> nodes;
  for (auto& [node_rank, node] : q.nodes) nodes.push_back(std::move(node));
  if (!q.hang) return Emit(QueryAnswered{q.tag, q.what, std::move(nodes), {}});
  HangReport report;
  report.silent = q.silent;
  report.stop = options_.hang_stop;
  report.nodes = std::move(nodes);
  Emit(std::move(report));
  if (!options_.hang_stop) return;
  std::string reason = fmt::format("{}: no rank on any node made progress for {}s (--hang-action stop)", Subject(),
                                   std::chrono::duration_cast<std::chrono::seconds>(q.silent).count());
  End(kJobHangExitCode, reason, [&](const Agent&) { return Message(Abort{reason, kJobHangExitCode}); });
}

void Coordinator::FinishAllQueries(const std::string& problem) {
  if (hang_query_) queries_.erase(*hang_query_);
  hang_query_.reset();
  std::vector<int> ids;
  for (const auto& [id, q] : queries_) ids.push_back(id);
  for (int id : ids) FinishQuery(id, problem);
}

std::optional<Clock::time_point> Coordinator::NextDeadline() const {
  std::optional<Clock::time_point> next;
  auto consider = [&next](std::optional<Clock::time_point> t) {
    if (t && (!next || *t < *next)) next = t;
  };
  consider(last_call_deadline_);
  consider(join_deadline_);
  for (const auto& [id, q] : queries_) consider(q.deadline);
  for (const auto& [id, agent] : agents_) {
    bool joined = agent.phase == Phase::kWaiting || agent.phase == Phase::kAssigned;
    consider(joined ? agent.last_seen + options_.heartbeat_timeout : agent.connected + options_.handshake_timeout);
  }
  return next;
}

}  // namespace dlaunch::rendezvous
