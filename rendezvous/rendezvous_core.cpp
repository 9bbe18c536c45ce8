#include "rendezvous/rendezvous_core.hpp"

#include <algorithm>
#include <set>

#include <boost/json/array.hpp>
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
    : options_(std::move(options)),
      listener_(listener),
      node_list_(options_.node_list),
      policy_({options_.max_restarts, options_.max_no_progress_restarts, options_.backoff_min, options_.backoff_max}) {
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
    if (phase == Phase::kAssigned) {
      // Each local rank's progress, by global rank; more values than it has ranks
      // are not its to report.
      auto node = static_cast<std::size_t>(agent.node_rank);
      if (node < plan_->table.size()) {
        std::size_t n = std::min(m->progress.size(), static_cast<std::size_t>(plan_->table[node].nproc));
        for (std::size_t i = 0; i < n; ++i)
          policy_.Progress(plan_->rank_offsets[node] + static_cast<int>(i), m->progress[i]);
      }
      Take(listener_.OnHeartbeat(agent.node_rank, *m, now));
    }
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
  } else if (auto* m = std::get_if<Done>(&message);
             m && phase == Phase::kWaiting && agent.stopping && m->generation == generation_) {
    // Its workers of the stopped generation are gone.
    agent.stopping = false;
    if (--stopping_ == 0) stop_deadline_.reset();
    UpdateGathering(now);
  } else if ((std::holds_alternative<WorkerFailed>(message) || std::holds_alternative<Done>(message)) &&
             phase == Phase::kWaiting && agent.last_rank >= 0) {
    // Sent by its last generation before our Standby reached it.
    Emit(Log{fmt::format("{}: ignoring {} from {}, which stands by", Subject(), TypeName(message), NodeName(agent)),
             kLimitIgnored});
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
                          std::holds_alternative<Query>(message) || std::holds_alternative<Standby>(message);
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
  if (Full()) {
    if (options_.spares == 0) {
      return Refuse(conn,
                    fmt::format("job '{}' is already running on {} of {} nodes", options_.run_id, plan_->table.size(),
                                options_.max_nodes),
                    now);
    }
    return Refuse(conn,
                  fmt::format("job '{}' already has its {} nodes and {} spare{}", options_.run_id, options_.max_nodes,
                              options_.spares, options_.spares == 1 ? "" : "s"),
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
    if (static_cast<int>(plan_->table.size()) >= options_.max_nodes && options_.spares > 0) {
      Emit(
          Log{fmt::format("{}: host '{}' waits as a spare ({} of {})", Subject(), join.host, waiting_, options_.spares),
              "late joins"});
      Emit(JobEvent{"spare_waiting", {{"host", join.host}, {"spares", Spares()}}});
      return;
    }
    Emit(Log{fmt::format("{}: host '{}' joined late; it waits for the next generation", Subject(), join.host),
             "late joins"});
    return;
  }
  if (!join_deadline_) join_deadline_ = now + options_.join_timeout;
  UpdateGathering(now);
}

bool RendezvousCore::Full() const {
  std::int64_t limit = std::int64_t{options_.max_nodes} + options_.spares;
  if (state_ == State::kGathering) return generation_ > 0 && waiting_ >= limit;  // standing by
  if (state_ != State::kRunning) return false;
  // An elastic job below its maximum takes late joiners for its next generation,
  // as it always has; --spares bounds how many wait beyond the maximum.
  if (Elastic() && options_.spares == 0) return false;
  return static_cast<std::int64_t>(plan_->table.size()) + waiting_ >= limit;
}

void RendezvousCore::UpdateGathering(Clock::time_point now) {
  if (state_ != State::kGathering) return;
  if (not_before_ && now < *not_before_) return;  // GatheringDeadlines comes back then
  if (stopping_ > 0) return;                      // a Done from each, or the stop deadline, comes back
  int waiting = waiting_;
  if (waiting == 0) {
    join_deadline_.reset();
    last_call_deadline_.reset();
  } else if (waiting >= options_.max_nodes || (generation_ > 0 && waiting >= options_.min_nodes)) {
    // A restart forms at once with whoever is here: no last call for nodes that
    // may never come.
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
  // The nodes of the last generation still here keep their place ahead of
  // spares and late joiners, in their old order; the others in arrival order.
  std::vector<std::pair<ConnId, Agent*>> members;
  for (auto& [id, agent] : agents_)
    if (agent.phase == Phase::kAssigned || agent.phase == Phase::kWaiting) members.emplace_back(id, &agent);
  std::sort(members.begin(), members.end(), [](const auto& x, const auto& y) {
    const Agent& a = *x.second;
    const Agent& b = *y.second;
    if ((a.last_rank >= 0) != (b.last_rank >= 0)) return a.last_rank >= 0;
    if (a.last_rank >= 0) return a.last_rank < b.last_rank;
    return a.arrival < b.arrival;
  });
  if (members.size() > static_cast<std::size_t>(options_.max_nodes)) {
    members.resize(static_cast<std::size_t>(options_.max_nodes));
  }
  return members;
}

std::vector<GenerationMember> RendezvousCore::Claims(const std::vector<std::pair<ConnId, Agent*>>& members) const {
  // Survivors keep their node ranks, so that their workers keep their RANKs and
  // sharded checkpoints still line up; a spare then fills the lost node's place
  // (NodeRanks gives the lowest free slot), and when none does the gap closes up.
  std::set<int> taken;
  for (const auto& [id, agent] : members)
    if (agent->slot >= 0) taken.insert(agent->slot);
  std::vector<GenerationMember> claims;
  for (const auto& [id, agent] : members) {
    int slot = agent->slot;
    if (slot < 0 && agent->last_rank >= 0 && taken.insert(agent->last_rank).second) slot = agent->last_rank;
    claims.push_back({&agent->join, slot, agent->arrival});
  }
  return claims;
}

void RendezvousCore::Assign(Clock::time_point now) {
  std::vector<std::pair<ConnId, Agent*>> members = Members();
  if (members.empty()) return;
  std::shared_ptr<const Generation> previous = plan_;
  plan_ = std::make_shared<const Generation>(PlanGeneration(
      Claims(members), {++generation_, policy_.restarts(), options_.run_id, options_.master_port, kDefaultMasterPort}));
  const Generation& g = *plan_;
  if (!g.problem.empty()) {
    std::string why = Subject() + ": " + g.problem;
    return End(1, why, [why](int) { return Message(Abort{why, 1}); });
  }
  state_ = State::kRunning;
  join_deadline_.reset();
  last_call_deadline_.reset();
  not_before_.reset();
  policy_.Started(now);
  std::vector<ConnId> by_rank(members.size());
  for (std::size_t i = 0; i < members.size(); ++i)
    by_rank[static_cast<std::size_t>(g.node_ranks[i])] = members[i].first;
  for (Action& action : listener_.OnGeneration(by_rank, g.table, now)) Emit(std::move(action));
  Emit(Log{fmt::format("{}: generation {}: {} nodes, {} workers, master {}:{}, restart {} of {}", Subject(),
                       generation_, g.table.size(), g.workers, g.whole.master_addr, g.whole.master_port,
                       policy_.restarts(), options_.max_restarts)});
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
  if (generation_ > 1) RecoveryEvents(members, *previous);
  for (auto& [id, agent] : members) agent->last_rank = agent->node_rank;
  Emit(std::move(sends));
}

void RendezvousCore::RecoveryEvents(const std::vector<std::pair<ConnId, Agent*>>& members, const Generation& previous) {
  auto ranks = [](int first, int count) { return fmt::format("{}-{}", first, first + count - 1); };
  boost::json::array moves;
  std::string said;
  for (const auto& [id, agent] : members) {
    auto node = static_cast<std::size_t>(agent->node_rank);
    int first = plan_->rank_offsets[node];
    int nproc = plan_->table[node].nproc;
    if (agent->last_rank < 0) {
      Emit(Log{fmt::format("{}: generation {}: host '{}' takes node rank {} (ranks {})", Subject(), generation_,
                           agent->join.host, agent->node_rank, ranks(first, nproc))});
      Emit(JobEvent{"spare_promoted",
                    {{"generation", generation_},
                     {"host", agent->join.host},
                     {"node", agent->node_rank},
                     {"first_rank", first},
                     {"spares", waiting_}}});
      continue;
    }
    auto old = static_cast<std::size_t>(agent->last_rank);
    int old_first = old < previous.rank_offsets.size() ? previous.rank_offsets[old] : -1;
    if (agent->last_rank == agent->node_rank && old_first == first) continue;
    moves.push_back(boost::json::object{{"host", agent->join.host},
                                        {"old_node", agent->last_rank},
                                        {"node", agent->node_rank},
                                        {"old_first_rank", old_first},
                                        {"first_rank", first},
                                        {"nproc", nproc}});
    said += fmt::format("{}node {} ({}) ranks {} -> node {} ranks {}", said.empty() ? "" : ", ", agent->last_rank,
                        agent->join.host, ranks(old_first, nproc), agent->node_rank, ranks(first, nproc));
  }
  if (moves.empty()) return;
  Emit(Log{fmt::format("{}: generation {} renumbers ranks: {}", Subject(), generation_, said)});
  Emit(JobEvent{"ranks_renumbered", {{"generation", generation_}, {"moves", std::move(moves)}, {"spares", waiting_}}});
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
  RestartDecision d = policy_.Failed(node_lost ? Failure::kNodeLost : Failure::kWorker, now);
  if (d.verdict == RestartDecision::Verdict::kNoProgress) {
    std::string why =
        fmt::format("{}; {}: not restarting (exit {}: do not requeue)", reason, d.why, base::kExitNoProgress);
    return End(base::kExitNoProgress, why, [why](int) { return Message(Abort{why, base::kExitNoProgress}); });
  }
  if (d.verdict == RestartDecision::Verdict::kExhausted) {
    return End(code, reason, [reason, code](int) { return Message(Abort{reason, code}); });
  }
  int here = 0;
  for (const auto& [id, agent] : agents_)
    here += agent.phase == Phase::kAssigned || agent.phase == Phase::kWaiting ? 1 : 0;
  if (d.wait.count() == 0 && std::min(here, options_.max_nodes) >= options_.min_nodes) {
    // The next generation forms once every node's workers of this one are gone:
    // a new rank must not reach an old rank 0's store on the same MASTER_PORT.
    return StandBy(fmt::format("{}; restarting ({} of {})", reason, policy_.restarts(), options_.max_restarts), d.wait,
                   now,
                   /*event=*/false);
  }
  if (d.wait.count() > 0) {
    return StandBy(fmt::format("{}; restarting ({} of {}) in {} (--restart-backoff)", reason, policy_.restarts(),
                               options_.max_restarts, FormatDuration(d.wait)),
                   d.wait, now);
  }
  StandBy(fmt::format("{}; restart {} of {} waits up to {} for a node to take its place", reason, policy_.restarts(),
                      options_.max_restarts, FormatDuration(options_.join_timeout)),
          d.wait, now);
}

void RendezvousCore::StandBy(const std::string& reason, std::chrono::milliseconds wait, Clock::time_point now,
                             bool event) {
  Emit(Log{reason});
  for (auto& [id, agent] : agents_) {
    if (agent.phase != Phase::kAssigned) continue;
    agent.phase = Phase::kWaiting;
    agent.node_rank = -1;
    agent.stopping = !agent.done;  // a node whose workers finished has none to stop
    stopping_ += agent.stopping ? 1 : 0;
    agent.done = false;
    ++waiting_;
    Emit(Send{id, Standby{generation_, reason}});
  }
  if (stopping_ > 0) stop_deadline_ = now + kStopAnswerTimeout;
  unfinished_ = 0;
  state_ = State::kGathering;
  Take(listener_.OnStandby());
  if (state_ != State::kGathering) return;
  not_before_.reset();
  if (wait.count() > 0) not_before_ = now + wait;
  join_deadline_ = now + wait + options_.join_timeout;
  last_call_deadline_.reset();
  if (event) {
    Emit(JobEvent{
        "standby",
        {{"generation", generation_}, {"restart", policy_.restarts()}, {"wait_ms", wait.count()}, {"reason", reason}}});
  }
  UpdateGathering(now);
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
  stopping_ = 0;
  stop_deadline_.reset();
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
  if (agent.stopping && --stopping_ == 0) stop_deadline_.reset();
  if (agent.phase == Phase::kAssigned && !agent.done) --unfinished_;
  if (agent.slot >= 0) slots_.erase(agent.slot);
  if (agent.phase == Phase::kAssigned && !agent.done && state_ == State::kRunning) {
    Emit(NodeLost{agent.node_rank, agent.join.host, what});
    Fail(fmt::format("{} {}", NodeName(agent), what), 1, true, now);
  } else if (agent.phase == Phase::kWaiting && state_ == State::kRunning) {
    Emit(JobEvent{"spare_left", {{"host", agent.join.host}, {"reason", what}, {"spares", Spares()}}});
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
  if (stop_deadline_ && now >= *stop_deadline_) {
    std::vector<std::string> late;
    for (auto& [id, agent] : agents_)
      if (std::exchange(agent.stopping, false)) late.push_back(agent.join.host);
    Emit(Log{fmt::format("{}: {} did not say within {} that their workers stopped; going on without waiting", Subject(),
                         NameList(late), FormatDuration(kStopAnswerTimeout))});
    stopping_ = 0;
    stop_deadline_.reset();
    UpdateGathering(now);
    if (state_ != State::kGathering) return;
  }
  if (not_before_) {
    if (now < *not_before_) return;
    not_before_.reset();  // the backoff passed
    UpdateGathering(now);
    if (state_ != State::kGathering) return;
  }
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
  consider(not_before_);
  consider(stop_deadline_);
  for (const auto& [id, agent] : agents_) {
    bool joined = agent.phase == Phase::kWaiting || agent.phase == Phase::kAssigned;
    consider(joined ? agent.last_seen + options_.heartbeat_timeout : agent.connected + options_.handshake_timeout);
  }
  return next;
}

}  // namespace dlaunch::rendezvous
