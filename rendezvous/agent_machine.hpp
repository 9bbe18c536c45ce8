// The agent of one node, as a state machine with no sockets and no clock: the
// mirror of coordinator.hpp on the other end of the connection.
//
// The session layer (rendezvous/agent_session.hpp) owns the connection, the timer and the
// local workers. It reports what happens (a connect finished or failed, a message
// arrived, the connection closed, the workers finished, time passed) and carries
// out the actions each call returns, in order. All methods are called from one
// thread.
//
// An agent goes through:
//   connecting: a TCP connect is in flight. A refused or timed-out connect is
//     retried at the next tick of a grid that every agent of the job shares
//     (retry_grid.hpp: RetryPeriod apart, longer for a larger job and after a
//     long wait),
//     until join_timeout has passed since Start (the coordinator may not be up
//     yet: at scale agents start before their host).
//   handshake: Hello sent; the coordinator must answer with a Challenge within
//     handshake_timeout. With a token the Challenge must prove the coordinator
//     holds it too (auth.hpp), or the agent gives up: it never joins a coordinator
//     it cannot trust. A silent peer is left and tried again (a host that was
//     briefly stopped); a peer that speaks another protocol ends the agent at once.
//   joining: Proof (with a token) and Join sent. Heartbeats start only now, so a
//     coordinator that reads the Hello late still sees the handshake first.
//   running: workers of the assigned generation run. A newer Assignment means the
//     coordinator restarts the job; an Abort stops the job here too.
//   stopping: the workers were told to stop (abort, restart, standby, lost
//     coordinator); the agent waits for them before it restarts, finishes, or
//     (after a Standby) waits joined again for the next Assignment.
//   barrier: the workers finished and Done went out; the coordinator's Done (or
//     Abort) says how the job ended.
//   ended: Finish was returned, or the owner left the job (Leave).
// While joined (joining, running, stopping, barrier) the agent sends a Heartbeat
// every heartbeat_interval; nothing heard for heartbeat_timeout means the
// coordinator is lost. While running, each Heartbeat carries `silence()`, how
// long this node's ranks have written nothing (0 in every other state), from
// which the coordinator judges job-wide hangs (coordinator.hpp). A Query while
// running becomes DoQuery, which the session answers with Answer(); in any other
// joined state the agent answers at once with an empty Report (no ranks run).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/defaults.hpp"
#include "base/status.hpp"
#include "rendezvous/codec.hpp"
#include "rendezvous/wait_notice.hpp"

namespace dlaunch::rendezvous {

struct AgentMachineOptions {
  std::string endpoint;  // "head:29400", for messages
  std::string token;     // "" = no authentication
  // Where `token` came from when the user gave none ("its user's loopback token
  // (/dev/shm/dlaunch-0/rdzv-token)"): named when the coordinator's proof fails, as
  // the job's token is then likely another one. "" when the user gave it.
  std::string token_from;
  // Why this node, whose address the endpoint is, does not host the coordinator
  // there ("--rdzv-endpoint 127.0.0.1:29400: cannot bind (Address already in
  // use)"); "" when it did not try. Said once, with the connect's error, when a
  // second connect there fails too: what holds the port is no coordinator.
  std::string not_hosting;
  // What this node joins with. An empty `addrs` is filled with the address this
  // host reaches the coordinator from (OnConnected's `local_address`).
  Join join;
  int min_nodes = 1;  // the job's spec, for a stand-alone coordinator (Hello)
  int max_nodes = 1;
  int max_restarts = 0;
  std::chrono::milliseconds hang_timeout{0};  // --hang-timeout, 0 off (Hello; capped at INT_MAX ms)
  bool hang_stop = false;                     // --hang-action stop (Hello)
  // --spares, --max-no-progress-restarts (-1 off) and --restart-backoff (Hello).
  int spares = 0;
  int max_no_progress_restarts = -1;
  std::chrono::milliseconds backoff_min{0};
  std::chrono::milliseconds backoff_max{0};
  // How long this node's ranks have been silent, for each Heartbeat while running.
  // Default: unset, 0.
  std::function<std::chrono::milliseconds()> silence;
  // Each local rank's progress (its progress file's largest number this
  // generation, -1 for none), by local rank, for each Heartbeat while running and
  // just before a WorkerFailed. Default: unset, none reported.
  std::function<std::vector<std::int64_t>()> progress;
  // From Start until an Assignment: connect attempts stop after this.
  // Default: 600s, torchrun's join_timeout.
  std::chrono::milliseconds join_timeout{base::kDefaultJoinTimeout};
  // A connect, or a Challenge after the Hello, must come within this. Default: 10s.
  std::chrono::milliseconds handshake_timeout{base::kHandshakeTimeout};
  // Default: 5s and 15s, torchrun's keep-alive.
  std::chrono::milliseconds heartbeat_interval{5'000};
  std::chrono::milliseconds heartbeat_timeout{base::kDefaultHeartbeatTimeout};
  // A refused connect is tried again at the next tick of the job's grid
  // (retry_grid.hpp), each tick `retry_period` apart on the wall clock, then
  // PatientPeriod of it once the agent has waited long. Default:
  // RetryPeriod(max_nodes) (retry_period 0).
  std::chrono::milliseconds retry_period{0};
  // The wall clock at `now`, since the epoch. Default: the system clock.
  std::function<std::chrono::nanoseconds(std::chrono::steady_clock::time_point now)> wall;
  // A number in [0, 1) for how late in its tick's spread a try comes, and a
  // nonce. Defaults: random.
  std::function<double()> random;
  std::function<Result<std::string>()> nonce_source;
  // This node hosts the coordinator, which logs what the agent would otherwise
  // say again: an abort's reason, and the wait for the other nodes once joined.
  bool hosted = false;
};

// Open a connection to the endpoint; a previous one is gone. The session answers
// with OnConnected or OnConnectFailed.
struct DoConnect {};
// Write `message` on the connection.
struct DoSend {
  Message message;
};
// Close the connection (a connect in flight is abandoned); no OnClosed follows.
struct DoHangUp {};
// Start this node's workers for `assignment`. No workers run when it comes.
struct DoRunWorkers {
  Assignment assignment;
};
// Stop this node's workers: `code` is the job's, `reason` a line to print ("" to
// print nothing). OnWorkersDone follows once they have exited.
struct DoStopWorkers {
  int code = 1;
  std::string reason;
};
// A line for the console: a notice ("subject: problem (cause)").
struct DoNotice {
  std::string line;
};
// This node is done: exit with `code`; `error`, when set, is the one line that
// says why (a failed join, a lost coordinator).
struct DoFinish {
  int code = 0;
  std::string error;
};
// The coordinator asks about this node's running workers (Query): answer with
// AgentMachine::Answer(id, items), once, whenever the answer is ready.
struct DoQuery {
  int id = 0;
  std::string what;  // "stacks" or "status"; anything else: answer with no items
};
using AgentAction = std::variant<DoConnect, DoSend, DoHangUp, DoRunWorkers, DoStopWorkers, DoNotice, DoFinish, DoQuery>;

class AgentMachine {
 public:
  using Clock = std::chrono::steady_clock;
  enum class State { kIdle, kConnecting, kBackoff, kHandshake, kJoining, kRunning, kStopping, kBarrier, kEnded };

  explicit AgentMachine(AgentMachineOptions options);

  std::vector<AgentAction> Start(Clock::time_point now);
  // The connect finished; `local_address` is this end's address ("10.0.0.1").
  std::vector<AgentAction> OnConnected(const std::string& local_address, Clock::time_point now);
  std::vector<AgentAction> OnConnectFailed(const std::string& why, Clock::time_point now);
  // The endpoint's name did not resolve: `why` says how it was looked up and
  // what the lookup said. Retried like a refused connect; the first one of a
  // wait is said at once (DoNotice), since a misspelt or NSS-only name would
  // otherwise pass for a host that is not up yet until the first WaitNotice.
  std::vector<AgentAction> OnUnresolved(const std::string& why, Clock::time_point now);
  std::vector<AgentAction> OnMessage(const Message& message, Clock::time_point now);
  // The connection ended: InvalidArgument for bytes that are not our frames,
  // anything else for a close or an error.
  std::vector<AgentAction> OnClosed(const Status& why, Clock::time_point now);
  // A local worker failed first: its global rank, shell code and how.
  std::vector<AgentAction> OnWorkerFailed(int rank, int code, const std::string& reason);
  // Every local worker has exited; `code` is the node's result.
  std::vector<AgentAction> OnWorkersDone(int code, Clock::time_point now);
  // `unread_input`: bytes from the coordinator wait unread in this process. A
  // coordinator silent for heartbeat_timeout is then not lost: this process is
  // behind (starved of CPU, or was stopped) and counts it as heard now.
  std::vector<AgentAction> OnTick(Clock::time_point now, bool unread_input = false);
  // The answer to DoQuery `id`: Report{id, node rank, items}, sent while joined
  // (else dropped). Items should fit the codec's caps (kMaxString each, the frame
  // within kMaxPayload); when they do not, the last items are left out until the
  // Report fits, with a DoNotice that says how many.
  std::vector<AgentAction> Answer(int id, std::vector<std::string> items);
  // This node leaves the job on purpose (its owner found it unfit; no workers
  // run): while joined, Leave goes out so the coordinator logs that it left
  // rather than lost it, then the connection closes. The machine ends without a
  // DoFinish: the owner goes on without it. Nothing happens once ended.
  std::vector<AgentAction> Leave();

  // When OnTick next has something to do; nullopt when nothing is timed.
  std::optional<Clock::time_point> NextDeadline() const;
  State state() const { return state_; }

 private:
  std::string Subject() const { return "rendezvous " + options_.endpoint; }
  bool Joined() const;
  void Emit(AgentAction action) { out_.push_back(std::move(action)); }
  std::vector<AgentAction> Flush() { return std::exchange(out_, {}); }
  void Finish(int code, std::string error);
  void Connect(Clock::time_point now);
  // Emits DoHangUp when a connection is open or being opened.
  void HangUp();
  // The connection is unusable before the join: retry after a pause, or give up
  // with `why` once join_timeout has passed.
  void Retry(const std::string& why, Clock::time_point now);
  void OnHandshakeMessage(const Message& message, Clock::time_point now);
  void OnChallenge(const Challenge& challenge, Clock::time_point now);
  // The coordinator is gone while joined.
  void Lost(const std::string& why);
  // Before the first assignment, a line now and then while the wait goes on (WaitNotice).
  void NoticeWait(Clock::time_point now);
  // When this agent's first wait began: Start, join_timeout before the deadline.
  Clock::time_point WaitingSince() const { return join_deadline_ - options_.join_timeout; }
  // The job ends for this node with `code`: stop the workers or finish now.
  void EndJob(int code, const std::string& reason);
  // The coordinator stopped the generation: stop the workers and wait, joined.
  void OnStandby(const Standby& standby);
  // What this Heartbeat says of the ranks' silence: 0 unless running.
  int Silence() const;

  AgentMachineOptions options_;
  State state_ = State::kIdle;
  Clock::time_point join_deadline_{};
  Clock::time_point deadline_{};  // connect or handshake deadline; next retry in kBackoff
  Clock::time_point last_heard_{};
  Clock::time_point next_beat_{};
  std::string last_error_ = "timed out";
  bool warned_silent_ = false;
  bool said_unresolved_ = false;  // OnUnresolved's notice was given
  int failed_connects_ = 0;       // for not_hosting's notice
  WaitNotice wait_notice_;        // from Start until the first Assignment
  bool connected_ = false;        // a connection is open or being opened
  std::string nonce_;
  int generation_ = 0;
  int node_rank_ = -1;
  std::optional<Assignment> next_;  // a restart's assignment, while stopping
  std::optional<int> outcome_;      // the job's code once it ended, while stopping
  int own_code_ = 0;                // the workers' result, in the barrier
  bool standing_by_ = false;        // stopping for a Standby: then wait, joined
  bool only_outcome_ = false;       // the job ended while stopping for a restart: its code, not the workers'
  std::vector<AgentAction> out_;
};

}  // namespace dlaunch::rendezvous
