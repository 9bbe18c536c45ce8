// The coordinator's rendezvous core: the connections of one job, their handshake,
// the gathering of joins, the assignment of generations, restarts and the job's
// end, as coordinator.hpp describes them. A state machine with no sockets and no
// clock: events go in, actions come out; one thread calls it.
//
// It knows nothing of hangs or queries. It tells a CoreListener (the Coordinator,
// which hands on to the hang detector and the query router) what happens to the
// generation as it happens, and emits the actions each call returns where they
// belong among its own.
//
// rendezvous_core.cpp runs a little over 400 lines: the handshake, gathering,
// assignment, failures and the job's end all work on the one agent table, and
// the pure parts are already elsewhere (generation.hpp, ranks.hpp, JoinProblem).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/coordinator.hpp"
#include "rendezvous/generation.hpp"
#include "rendezvous/ranks.hpp"
#include "rendezvous/restart_policy.hpp"
#include "rendezvous/wait_notice.hpp"

namespace dlaunch::rendezvous {

// What the core tells the parts beside it. Each call returns the actions to emit
// at that point. A HangReport with `stop` among them ends the job at once with
// kJobHangExitCode (Abort to every node), right after the report.
class CoreListener {
 public:
  virtual ~CoreListener() = default;
  // Generation `table` was assigned at `now`, `conns` by node rank; called before
  // any of its Assignments is sent.
  virtual std::vector<Action> OnGeneration(const std::vector<ConnId>& conns, const std::vector<envmap::Node>& table,
                                           Clock::time_point now) = 0;
  // A Heartbeat from node `node_rank` of the running generation.
  virtual std::vector<Action> OnHeartbeat(int node_rank, const Heartbeat& beat, Clock::time_point now) = 0;
  // A Report from a joined agent; `name` names it ("node 1 (b)", "host 'c'").
  virtual std::vector<Action> OnReport(ConnId conn, const std::string& name, const Report& report) = 0;
  // Node `node_rank` on `conn` sent Done for the running generation.
  virtual std::vector<Action> OnNodeDone(ConnId conn, int node_rank, Clock::time_point now) = 0;
  // A joined agent is gone; `node_rank` is -1 unless it was assigned. `what` says
  // how ("left", "lost (connection closed)").
  virtual std::vector<Action> OnNodeGone(ConnId conn, int node_rank, const std::string& what,
                                         Clock::time_point now) = 0;
  // Time passed while a generation runs.
  virtual std::vector<Action> OnTick(Clock::time_point now) = 0;
  // The running generation stopped and the job waits for its next one (a lost
  // node's replacement, a restart's backoff): no generation runs until the next
  // OnGeneration.
  virtual std::vector<Action> OnStandby() = 0;
  // The job ended; called before its JobEnded is emitted.
  virtual std::vector<Action> OnJobEnd() = 0;
};

class RendezvousCore {
 public:
  using State = Coordinator::State;

  // `options` must pass Validate(); `listener` must outlive the core.
  RendezvousCore(CoordinatorOptions options, CoreListener& listener);

  // As Coordinator's methods of the same names.
  std::vector<Action> OnConnect(ConnId conn, std::string peer, Clock::time_point now);
  std::vector<Action> OnAuthenticated(ConnId conn, std::string peer, Clock::time_point now);
  std::vector<Action> OnMessage(ConnId conn, const Message& message, Clock::time_point now);
  std::vector<Action> OnDisconnect(ConnId conn, Clock::time_point now);
  std::vector<Action> OnProtocolError(ConnId conn, const Status& error, Clock::time_point now);
  std::vector<Action> OnTick(Clock::time_point now, const Coordinator::UnreadInput& unread = {});
  std::vector<Action> AbortJob(int code, const std::string& cause);
  // Its own deadlines only: handshakes, heartbeats, join and last call.
  std::optional<Clock::time_point> NextDeadline() const;

  State state() const { return state_; }
  int generation() const { return generation_; }
  int restart_count() const { return policy_.restarts(); }
  const std::vector<envmap::Node>& nodes() const { return plan_->table; }
  // Connections it holds (handshaking, waiting or assigned).
  std::size_t connections() const { return agents_.size(); }

 private:
  enum class Phase { kHello, kProof, kJoin, kWaiting, kAssigned };
  struct Agent {
    std::string peer;
    Phase phase = Phase::kHello;
    Clock::time_point connected;
    Clock::time_point last_seen;
    HandshakeState handshake;
    Join join;
    std::uint64_t arrival = 0;  // sequence number of its Join
    int slot = -1;              // fixed slot claimed at Join (ranks.hpp)
    int node_rank = -1;         // in the current generation; -1 while waiting
    int last_rank = -1;         // its node rank in the last generation it ran in; -1 none (a spare)
    bool done = false;          // sent Done for the current generation
    bool stopping = false;      // standing by, its workers of the last generation not yet said gone
  };

  void OnHello(ConnId conn, Agent& agent, const Hello& hello, Clock::time_point now);
  void OnProof(ConnId conn, Agent& agent, const Proof& proof, Clock::time_point now);
  void OnJoin(ConnId conn, Agent& agent, const Join& join, Clock::time_point now);
  void OnWorkerFailed(Agent& agent, const WorkerFailed& failed, Clock::time_point now);
  void OnDone(ConnId conn, Agent& agent, const Done& done, Clock::time_point now);
  void OnUnexpected(ConnId conn, Phase phase, const Message& message, Clock::time_point now);

  // Sends Refused, closes and forgets the connection (a node of the running
  // generation is then lost).
  void Refuse(ConnId conn, const std::string& problem, Clock::time_point now);
  // Closes a connection with a log line; Remove must follow.
  void CloseConn(ConnId conn, const std::string& problem);
  // Forgets a connection; a node of the running generation that had not finished
  // is lost, and `what` ("left", "lost (connection closed)") says how.
  void Remove(ConnId conn, const std::string& what, Clock::time_point now);
  // Closes the connections past their handshake or heartbeat deadline.
  void ExpireConnections(Clock::time_point now, const Coordinator::UnreadInput& unread);
  void UpdateGathering(Clock::time_point now);
  // The last call's end assigns; the join timeout's aborts.
  void GatheringDeadlines(Clock::time_point now);
  // The hosts of the joined agents waiting for an assignment, in arrival order.
  std::vector<std::string> WaitingHosts() const;
  // The agents of the next generation, in the order NodeRanks wants.
  std::vector<std::pair<ConnId, Agent*>> Members();
  void Assign(Clock::time_point now);
  // A failure in the running generation: restart (now, or after standing by) or
  // end the job, as the restart policy says.
  void Fail(const std::string& cause, int code, bool node_lost, Clock::time_point now);
  // Stops the running generation without ending the job: every assigned agent
  // gets Standby and waits again, keeping its node rank for the next generation,
  // which forms once every one of them has said its workers are gone (a Done for
  // the stopped generation, or kStopAnswerTimeout), `wait` has passed and enough
  // nodes are here (at most the join timeout after that).
  // `event`: write the standby event (a wait or a missing node, not a plain
  // restart's stop).
  void StandBy(const std::string& reason, std::chrono::milliseconds wait, Clock::time_point now, bool event = true);
  // The slot each member claims: its fixed slot, else the node rank it had in the
  // last generation where no fixed slot of the others takes it.
  std::vector<GenerationMember> Claims(const std::vector<std::pair<ConnId, Agent*>>& members) const;
  // Events for a formed generation: spares promoted, survivors renumbered.
  void RecoveryEvents(const std::vector<std::pair<ConnId, Agent*>>& members, const Generation& previous);
  // Whether a join now would make one agent more than the job and its spares hold.
  bool Full() const;
  bool Elastic() const { return options_.min_nodes < options_.max_nodes; }
  // Joined agents waiting while a generation runs: the spares.
  int Spares() const { return state_ == State::kRunning ? waiting_ : 0; }
  // Sends `last(node_rank)` to every joined agent, closes every connection (one
  // Farewell), ends the job. `last` is kept in the action: it owns what it uses.
  void End(int code, const std::string& summary, std::function<Message(int node_rank)> last);

  // Emits the listener's `actions`, ending the job after a stopping HangReport.
  void Take(std::vector<Action> actions);
  std::string Subject() const;
  std::string NodeName(const Agent& agent) const;
  void Emit(Action action) { out_.push_back(std::move(action)); }
  std::vector<Action> Flush() { return std::exchange(out_, {}); }

  CoordinatorOptions options_;
  CoreListener& listener_;
  NodeList node_list_;  // options_.node_list, indexed by name
  State state_ = State::kGathering;
  std::map<ConnId, Agent> agents_;
  int waiting_ = 0;     // agents in Phase::kWaiting
  int unfinished_ = 0;  // agents in Phase::kAssigned without Done
  // No connection's deadline (handshake or heartbeat) comes before this, so a tick
  // before it need not look at any: a heartbeat only moves a deadline later, and
  // each new deadline (a connect, a Join) lowers it. ExpireConnections makes it
  // exact again. Default: none to look at.
  Clock::time_point expiry_floor_ = Clock::time_point::max();
  std::map<int, std::string> slots_;  // fixed slots held by joined agents -> host
  std::uint64_t arrivals_ = 0;
  int generation_ = 0;
  // The last generation planned (its table is nodes()); shared with the
  // SendAssignments that writes it out.
  std::shared_ptr<const Generation> plan_ = std::make_shared<const Generation>();
  std::optional<Clock::time_point> join_deadline_;
  std::optional<Clock::time_point> last_call_deadline_;
  // After a Standby: the next generation forms no earlier than this (backoff).
  std::optional<Clock::time_point> not_before_;
  int stopping_ = 0;  // agents standing by whose workers may still run
  // Those that have not said so by then are taken at their word.
  std::optional<Clock::time_point> stop_deadline_;
  RestartPolicy policy_;
  WaitNotice wait_notice_;  // while fewer than min_nodes have joined
  std::vector<Action> out_;
};

}  // namespace dlaunch::rendezvous
