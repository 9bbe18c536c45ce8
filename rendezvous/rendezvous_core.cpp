#include "rendezvous/rendezvous_core.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "rendezvous/auth.hpp"
#include "rendezvous/generation.hpp"
#include "rendezvous/ranks.hpp"

namespace dlaunch::rendezvous {
namespace {

// Kinds of log lines that peers can repeat at will (Log::limit).
constexpr const char* kLimitClosed = "closed connections";
constexpr const char* kLimitIgnored = "ignored messages";
constexpr const char* kLimitNumbers = "messages with a bad number";

}  // namespace

RendezvousCore::RendezvousCore(CoordinatorOptions options, CoreListener& listener)
    : options_(std::move(options)), listener_(listener), node_list_(options_.node_list) {
  if (!options_.nonce_source) options_.nonce_source = RandomNonce;
}

void RendezvousCore::Take(std::vector<Action> actions) {
  for (Action& action : actions) {
    const auto* report = std::get_if<HangReport>(&action);
    std::optional<std::chrono::milliseconds> stop;
    if (report && report->stop) stop = report->silent;
    Emit(std::move(action));
    if (!stop) continue;
    std::string reason = fmt::format("{}: no rank on any node made progress for {}s (--hang-action stop)", Subject(),
                                     std::chrono::duration_cast<std::chrono::seconds>(*stop).count());
    return End(kJobHangExitCode, reason, [reason](int) { return Message(Abort{reason, kJobHangExitCode}); });
  }
}

std::string RendezvousCore::Subject() const {
  return options_.endpoint.empty() ? "rendezvous" : "rendezvous " + options_.endpoint;
}

std::string RendezvousCore::NodeName(const Agent& agent) const {
  if (agent.node_rank >= 0) return fmt::format("node {} ({})", agent.node_rank, agent.join.host);
  return fmt::format("host '{}'", agent.join.host);
}

std::vector<Action> RendezvousCore::OnConnect(ConnId conn, std::string peer, Clock::time_point now) {
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
  expiry_floor_ = std::min(expiry_floor_, now + options_.handshake_timeout);
  return Flush();
}

std::vector<Action> RendezvousCore::OnAuthenticated(ConnId conn, std::string peer, Clock::time_point now) {
  std::vector<Action> actions = OnConnect(conn, std::move(peer), now);
  if (auto it = agents_.find(conn); it != agents_.end()) it->second.phase = Phase::kJoin;
  return actions;
}

std::vector<Action> RendezvousCore::OnMessage(ConnId conn, const Message& message, Clock::time_point now) {
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
    if (phase == Phase::kAssigned) Take(listener_.OnHeartbeat(agent.node_rank, *m, now));
    Emit(Send{conn, Heartbeat{}});
  } else if (std::holds_alternative<Leave>(message) && joined) {
    CloseConn(conn, "left");
    Remove(conn, "left", now);
  } else if (auto* m = std::get_if<WorkerFailed>(&message); m && phase == Phase::kAssigned) {
    OnWorkerFailed(agent, *m, now);
  } else if (auto* m = std::get_if<Done>(&message); m && phase == Phase::kAssigned) {
    OnDone(conn, agent, *m, now);
  } else if (auto* m = std::get_if<Report>(&message); m && joined) {
    Take(listener_.OnReport(conn, NodeName(agent), *m));
  } else {
    OnUnexpected(conn, phase, message, now);
  }
  return Flush();
}

void RendezvousCore::OnUnexpected(ConnId conn, Phase phase, const Message& message, Clock::time_point now) {
  static constexpr const char* kWhere[] = {"before the hello", "before the proof", "before the join",
                                           "while waiting for an assignment", "from an assigned node"};
  bool coordinator_only = std::holds_alternative<Challenge>(message) || std::holds_alternative<Assignment>(message) ||
                          std::holds_alternative<Abort>(message) || std::holds_alternative<Refused>(message) ||
                          std::holds_alternative<Query>(message);
  std::string problem = fmt::format("unexpected {} {}", TypeName(message),
                                    coordinator_only ? "from an agent" : kWhere[static_cast<int>(phase)]);
  Refuse(conn, problem, now);
}

void RendezvousCore::OnHello(ConnId conn, Agent& agent, const Hello& hello, Clock::time_point now) {
  Result<Challenge> challenge =
      AnswerHello(options_.token, options_.run_id, hello, options_.nonce_source, agent.handshake);
  if (!challenge.ok()) return Refuse(conn, challenge.status().message(), now);
  agent.phase = options_.token.empty() ? Phase::kJoin : Phase::kProof;
  Emit(Send{conn, *challenge});
}

void RendezvousCore::OnProof(ConnId conn, Agent& agent, const Proof& proof, Clock::time_point now) {
  if (Status s = CheckProof(options_.token, options_.run_id, agent.handshake, proof); !s.ok()) {
    return Refuse(conn, s.message(), now);
  }
  agent.phase = Phase::kJoin;
}

void RendezvousCore::OnJoin(ConnId conn, Agent& agent, const Join& join, Clock::time_point now) {
  if (std::string problem = JoinProblem(join, options_.run_id); !problem.empty()) {
    return Refuse(conn, problem, now);
  }
  if (state_ == State::kRunning && options_.min_nodes == options_.max_nodes) {
    return Refuse(conn,
                  fmt::format("job '{}' is already running on {} of {} nodes", options_.run_id, plan_->table.size(),
                              options_.max_nodes),
                  now);
  }
  Result<int> slot = ClaimSlot(join, node_list_, options_.max_nodes, slots_);
  if (!slot.ok()) return Refuse(conn, slot.status().message(), now);

  agent.join = join;
  agent.slot = *slot;
  agent.arrival = arrivals_++;
  agent.phase = Phase::kWaiting;
  ++waiting_;
  expiry_floor_ = std::min(expiry_floor_, agent.last_seen + options_.heartbeat_timeout);
  if (agent.slot >= 0) slots_[agent.slot] = join.host;
  if (state_ == State::kRunning) {
    Emit(Log{fmt::format("{}: host '{}' joined late; it waits for the next generation", Subject(), join.host),
             "late joins"});
    return;
  }
  if (!join_deadline_) join_deadline_ = now + options_.join_timeout;
  UpdateGathering(now);
}

void RendezvousCore::UpdateGathering(Clock::time_point now) {
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
    Emit(Log{fmt::format("{}: {} of {}..{} nodes joined; last call for {}", Subject(), waiting, options_.min_nodes,
                         options_.max_nodes, FormatDuration(options_.last_call_timeout)),
             "last calls"});
  }
}

std::vector<std::pair<ConnId, RendezvousCore::Agent*>> RendezvousCore::Members() {
  // The nodes of the last generation still here keep their place ahead of late
  // joiners; within each group, arrival order.
  std::vector<std::pair<ConnId, Agent*>> members;
  for (Phase phase : {Phase::kAssigned, Phase::kWaiting}) {
    std::size_t first = members.size();
    for (auto& [id, agent] : agents_)
      if (agent.phase == phase) members.emplace_back(id, &agent);
    std::sort(members.begin() + static_cast<std::ptrdiff_t>(first), members.end(),
              [](const auto& a, const auto& b) { return a.second->arrival < b.second->arrival; });
  }
  if (members.size() > static_cast<std::size_t>(options_.max_nodes)) {
    members.resize(static_cast<std::size_t>(options_.max_nodes));
  }
  return members;
}

void RendezvousCore::Assign(Clock::time_point now) {
  std::vector<std::pair<ConnId, Agent*>> members = Members();
  if (members.empty()) return;
  std::vector<GenerationMember> claims;
  for (const auto& [id, agent] : members) claims.push_back({&agent->join, agent->slot, agent->arrival});
  plan_ = std::make_shared<const Generation>(PlanGeneration(
      claims, {++generation_, restart_count_, options_.run_id, options_.master_port, kDefaultMasterPort}));
  const Generation& g = *plan_;
  if (!g.problem.empty()) {
    std::string why = Subject() + ": " + g.problem;
    return End(1, why, [why](int) { return Message(Abort{why, 1}); });
  }
  state_ = State::kRunning;
  join_deadline_.reset();
  last_call_deadline_.reset();
  std::vector<ConnId> by_rank(members.size());
  for (std::size_t i = 0; i < members.size(); ++i)
    by_rank[static_cast<std::size_t>(g.node_ranks[i])] = members[i].first;
  for (Action& action : listener_.OnGeneration(by_rank, g.table, now)) Emit(std::move(action));
  Emit(Log{fmt::format("{}: generation {}: {} nodes, {} workers, master {}:{}, restart {} of {}", Subject(),
                       generation_, g.table.size(), g.workers, g.whole.master_addr, g.whole.master_port, restart_count_,
                       options_.max_restarts)});
  unfinished_ = static_cast<int>(members.size());
  SendAssignments sends{plan_, {}};
  sends.to.reserve(members.size());
  for (std::size_t i = 0; i < members.size(); ++i) {
    Agent& agent = *members[i].second;
    if (agent.phase == Phase::kWaiting) --waiting_;
    agent.phase = Phase::kAssigned;
    agent.node_rank = g.node_ranks[i];
    agent.done = false;
    sends.to.push_back({members[i].first, agent.node_rank, agent.join.wants_table != 0});
  }
  Emit(std::move(sends));
}

void RendezvousCore::OnWorkerFailed(Agent& agent, const WorkerFailed& failed, Clock::time_point now) {
  if (failed.generation != generation_) {
    Emit(Log{fmt::format("{}: ignoring a worker failure of generation {} from {} (now {})", Subject(),
                         failed.generation, NodeName(agent), generation_),
             kLimitIgnored});
    return;
  }
  // The code becomes every dlaunch's exit status, and one outside 1..255 wraps
  // (256 would exit 0); the rank is named on the host's console.
  int code = failed.code != 0 ? failed.code : 1;
  if (code < 1 || code > 255) {
    Emit(Log{
        fmt::format("{}: {} says a worker failed with code {}; counting 1", Subject(), NodeName(agent), failed.code),
        kLimitNumbers});
    code = 1;
  }
  // (A node rank outside the table, -1 included, owns no rank.)
  auto node = static_cast<std::size_t>(agent.node_rank);
  int first = node < plan_->rank_offsets.size() ? plan_->rank_offsets[node] : 0;
  int count = node < plan_->table.size() ? plan_->table[node].nproc : 0;
  std::string rank = fmt::format("rank {}", failed.rank);
  if (failed.rank < first || failed.rank - first >= count) {
    Emit(Log{fmt::format("{}: {} says rank {} failed, which is not one of its ranks {}-{}", Subject(), NodeName(agent),
                         failed.rank, first, first + count - 1),
             kLimitNumbers});
    rank = "a rank";
  }
  std::string how = failed.reason.empty() ? fmt::format("failed with code {}", code) : failed.reason;
  Fail(fmt::format("{} {} {}", NodeName(agent), rank, how), code, false, now);
}

void RendezvousCore::OnDone(ConnId conn, Agent& agent, const Done& done, Clock::time_point now) {
  if (done.generation != generation_) {
    Emit(Log{fmt::format("{}: ignoring done of generation {} from {} (now {})", Subject(), done.generation,
                         NodeName(agent), generation_),
             kLimitIgnored});
    return;
  }
  if (done.exit_code != 0) {
    int code = done.exit_code;
    if (code < 1 || code > 255) {  // as a worker failure's code
      Emit(Log{fmt::format("{}: {} says it finished with exit code {}; counting 1", Subject(), NodeName(agent),
                           done.exit_code),
               kLimitNumbers});
      code = 1;
    }
    return Fail(fmt::format("{} finished with exit code {}", NodeName(agent), code), code, false, now);
  }
  if (!agent.done) --unfinished_;
  agent.done = true;
  Take(listener_.OnNodeDone(conn, agent.node_rank, now));
  // A count, not a walk over every agent: N Dones cost O(N), not O(N^2).
  if (state_ != State::kRunning || unfinished_ > 0) return;
  std::string summary = fmt::format("{}: job '{}' finished on {} nodes ({} workers, generation {})", Subject(),
                                    options_.run_id, plan_->table.size(), plan_->workers, generation_);
  int generation = generation_;
  End(0, summary, [generation](int node_rank) { return Message(Done{generation, node_rank, 0}); });
}

void RendezvousCore::Fail(const std::string& cause, int code, bool node_lost, Clock::time_point now) {
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
  End(code, reason, [reason, code](int) { return Message(Abort{reason, code}); });
}

std::vector<Action> RendezvousCore::AbortJob(int code, const std::string& cause) {
  if (state_ == State::kEnded) return {};
  std::string reason = Subject() + ": " + cause;
  End(code, reason, [reason, code](int) { return Message(rendezvous::Abort{reason, code}); });
  return Flush();
}

void RendezvousCore::End(int code, const std::string& summary, std::function<Message(int node_rank)> last) {
  Farewell bye{{}, std::move(last), "job ended"};
  bye.to.reserve(agents_.size());
  for (const auto& [id, agent] : agents_) {
    bool joined = agent.phase == Phase::kWaiting || agent.phase == Phase::kAssigned;
    bye.to.push_back({id, agent.node_rank, joined});
  }
  Emit(std::move(bye));
  agents_.clear();
  slots_.clear();
  waiting_ = 0;
  unfinished_ = 0;
  for (Action& action : listener_.OnJobEnd()) Emit(std::move(action));
  state_ = State::kEnded;
  join_deadline_.reset();
  last_call_deadline_.reset();
  Emit(JobEnded{code, summary});  // the server logs its summary
}

void RendezvousCore::Refuse(ConnId conn, const std::string& problem, Clock::time_point now) {
  Emit(Send{conn, Refused{Subject() + ": " + problem}});
  CloseConn(conn, problem);
  Remove(conn, fmt::format("lost ({})", problem), now);
}

void RendezvousCore::CloseConn(ConnId conn, const std::string& problem) {
  Emit(Close{conn, problem});
  Emit(Log{fmt::format("{}: closed {}: {}", Subject(), agents_.at(conn).peer, problem), kLimitClosed});
}

void RendezvousCore::Remove(ConnId conn, const std::string& what, Clock::time_point now) {
  auto it = agents_.find(conn);
  if (it == agents_.end()) return;
  Agent agent = std::move(it->second);
  agents_.erase(it);
  int node_rank = agent.phase == Phase::kAssigned ? agent.node_rank : -1;
  if (agent.phase == Phase::kWaiting || agent.phase == Phase::kAssigned) {
    Take(listener_.OnNodeGone(conn, node_rank, what, now));
  }
  if (agent.phase == Phase::kWaiting) --waiting_;
  if (agent.phase == Phase::kAssigned && !agent.done) --unfinished_;
  if (agent.slot >= 0) slots_.erase(agent.slot);
  if (agent.phase == Phase::kAssigned && !agent.done && state_ == State::kRunning) {
    Emit(NodeLost{agent.node_rank, agent.join.host, what});
    Fail(fmt::format("{} {}", NodeName(agent), what), 1, true, now);
  } else if (agent.phase == Phase::kWaiting) {
    UpdateGathering(now);
  }
}

std::vector<Action> RendezvousCore::OnDisconnect(ConnId conn, Clock::time_point now) {
  Remove(conn, "lost (connection closed)", now);
  return Flush();
}

std::vector<Action> RendezvousCore::OnProtocolError(ConnId conn, const Status& error, Clock::time_point now) {
  if (!agents_.count(conn)) return Flush();
  CloseConn(conn, error.message());
  Remove(conn, fmt::format("lost ({})", error.message()), now);
  return Flush();
}

std::vector<Action> RendezvousCore::OnTick(Clock::time_point now, const Coordinator::UnreadInput& unread) {
  ExpireConnections(now, unread);
  if (state_ == State::kRunning) Take(listener_.OnTick(now));
  if (state_ == State::kGathering) GatheringDeadlines(now);
  return Flush();
}

void RendezvousCore::ExpireConnections(Clock::time_point now, const Coordinator::UnreadInput& unread) {
  // Ticks come every 50ms: walking 100,000 agents on each would cost more than
  // the agents' own messages. Walk only once the earliest deadline may have passed.
  if (now < expiry_floor_) return;
  expiry_floor_ = Clock::time_point::max();
  std::vector<std::pair<ConnId, std::string>> expired;
  for (auto& [id, agent] : agents_) {
    bool joined = agent.phase == Phase::kWaiting || agent.phase == Phase::kAssigned;
    if (!joined && now - agent.connected >= options_.handshake_timeout) {
      expired.emplace_back(id, fmt::format("no join within {}", FormatDuration(options_.handshake_timeout)));
      continue;
    }
    if (joined && now - agent.last_seen >= options_.heartbeat_timeout) {
      if (!unread || !unread(id)) {
        expired.emplace_back(id, fmt::format("no heartbeat for {}", FormatDuration(options_.heartbeat_timeout)));
        continue;
      }
      agent.last_seen = now;  // it spoke; we have not read it yet
    }
    expiry_floor_ = std::min(expiry_floor_, joined ? agent.last_seen + options_.heartbeat_timeout
                                                   : agent.connected + options_.handshake_timeout);
  }
  for (const auto& [id, problem] : expired) {
    if (!agents_.count(id)) continue;  // the job ended on an earlier one
    CloseConn(id, problem);
    Remove(id, fmt::format("lost ({})", problem), now);
  }
}

void RendezvousCore::GatheringDeadlines(Clock::time_point now) {
  if (last_call_deadline_ && now >= *last_call_deadline_) return Assign(now);
  if (!join_deadline_) return;
  if (now < *join_deadline_) {
    // Fewer than min_nodes (a last call is quiet: it ends by itself soon): say
    // who is here now and then, so a long wait does not look like a hang.
    Clock::time_point since = *join_deadline_ - options_.join_timeout;
    if (!last_call_deadline_ && wait_notice_.Due(since, now)) {
      std::vector<std::string> hosts = WaitingHosts();
      Emit(Log{
          fmt::format("{}: still waiting for {} of {} nodes after {} (joined: {}); the join timeout ends it "
                      "in {}",
                      Subject(), options_.min_nodes - static_cast<int>(hosts.size()), options_.min_nodes,
                      FormatDuration(std::chrono::duration_cast<std::chrono::seconds>(now - since)), NameList(hosts),
                      FormatDuration(std::chrono::duration_cast<std::chrono::seconds>(*join_deadline_ - now))),
          "waits"});
    }
    return;
  }
  std::vector<std::string> hosts = WaitingHosts();
  std::string reason =
      fmt::format("{}: timed out after {} waiting for {} of {} nodes (joined: {})", Subject(),
                  FormatDuration(options_.join_timeout), options_.min_nodes - static_cast<int>(hosts.size()),
                  options_.min_nodes, NameList(hosts));
  End(1, reason, [reason](int) { return Message(Abort{reason, 1}); });
}

std::vector<std::string> RendezvousCore::WaitingHosts() const {
  std::vector<const Agent*> waiting;
  for (const auto& [id, agent] : agents_)
    if (agent.phase == Phase::kWaiting) waiting.push_back(&agent);
  std::sort(waiting.begin(), waiting.end(), [](auto* a, auto* b) { return a->arrival < b->arrival; });
  std::vector<std::string> hosts;
  for (const Agent* agent : waiting) hosts.push_back(agent->join.host);
  return hosts;
}

std::optional<Clock::time_point> RendezvousCore::NextDeadline() const {
  std::optional<Clock::time_point> next;
  auto consider = [&next](std::optional<Clock::time_point> t) {
    if (t && (!next || *t < *next)) next = t;
  };
  consider(last_call_deadline_);
  consider(join_deadline_);
  for (const auto& [id, agent] : agents_) {
    bool joined = agent.phase == Phase::kWaiting || agent.phase == Phase::kAssigned;
    consider(joined ? agent.last_seen + options_.heartbeat_timeout : agent.connected + options_.handshake_timeout);
  }
  return next;
}

}  // namespace dlaunch::rendezvous
