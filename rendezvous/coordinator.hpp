// The coordinator of one job, as a state machine with no sockets and no clock.
//
// The session layer (Asio) owns the connections. It reports what happens (a peer
// connected, a message arrived, a peer went away, time passed) and carries out the
// actions each call returns, in order. A session layer either feeds a connection
// from its first byte (OnConnect, then Hello, Proof, Join), or shakes hands itself
// with AnswerHello and CheckProof and hands the connection over authenticated
// (OnAuthenticated, then Join): the server does the latter, so that a job exists
// only once an authenticated Join arrives (server.hpp). All methods are called from
// one thread.
//
// Coordinator only wires three machines, each events in and actions out with no
// clock of its own: the rendezvous core (rendezvous_core.hpp: connections, joins,
// generations, restarts, the job's end), the hang detector (hang_detector.hpp)
// and the query router (query_router.hpp). The core tells the other two what
// happens to the generation; their actions land among its own in order.
//
// A job goes through:
//   gathering: agents shake hands (Hello, Challenge, Proof when a token is set) and
//     Join. Once min_nodes have joined, a last call of last_call_timeout starts;
//     the job is assigned when max_nodes have joined or the last call ends. Fewer
//     than min_nodes after join_timeout (from the first Join) aborts every agent.
//   running: every node got an Assignment of this generation. A failed worker, or
//     a lost node (closed, silent for heartbeat_timeout with nothing of it left
//     unread in this process, or Leave), aborts the job unless the restart policy
//     (restart_policy.hpp) allows a restart. Then every assigned node gets
//     Standby, stops its workers and says so with a Done for that generation (a
//     new rank must not reach an old rank 0's store on the same MASTER_PORT), and
//     the job gathers again: the next generation goes to the agents still there,
//     keeping their node ranks, and to waiting spares and late joiners (up to
//     max_nodes), once the stop is confirmed (or kStopAnswerTimeout passed), a
//     backoff has passed, and min_nodes (all of them for a fixed-size job) are
//     here: up to join_timeout for a missing node. Done from every node is the
//     exit barrier: each gets Done back and the job ends with 0.
//   ended: JobEnded was returned; every connection was closed and new ones are
//     refused.
//
// Every joined agent, waiting or assigned, must send a Heartbeat at least every
// heartbeat_timeout (a third of it is a good period); each one is answered, so the
// agent can tell a lost coordinator by the missing answers. An Assignment carries
// the whole node table only to agents whose Join asked for it (wants_table); the
// others get their own row, so a job of n such agents costs O(n) bytes, and only
// the whole-table agents cost O(n) each (O(n^2) when all ask).
//
// Sizes are checked: a Join with nproc over kMaxNprocPerNode is refused, and a
// generation whose world size would reach 2^31 ends the job with Abort.
//
// Hangs (hang_timeout > 0): each Heartbeat of a running node says how long its
// ranks have been silent. The job is silent for the stretch that ends at the
// earliest of the running nodes' last heartbeats and starts at the latest of
// their ranks' last output (heartbeat time - silent_ms, and never before the
// generation began): output a node wrote after its last heartbeat is not known
// yet, so time since a heartbeat is never counted as silence, and a hang is
// noticed up to one heartbeat period late rather than reported falsely. Once that
// stretch reaches hang_timeout, every running node gets Query{id, "stacks"}, and
// HangSuspected is returned; when every node has answered with its Report (or
// finished, or kHangReportTimeout passed), one HangReport carries them all. With
// hang_stop the job then ends: Abort with kJobHangExitCode to every node. It is
// reported again only after new output (some node's last output moved on) and a
// new full silence. A Report that is not for the open query, comes from a node
// that was not asked (or already answered), names another node or carries more
// items than the node has ranks is ignored with one Log line; a node's items are
// kept only while the query holds under kMaxHangReportBytes in all.
//
// On-demand queries (Ask): the process hosting the coordinator asks every running
// node a question ("status", "stacks") for the live view. Each gets its own Query
// id from the same counter as the hang queries, so any number of them and a hang
// query can be open at once; a Report goes to the query its id names. The answer,
// QueryAnswered with the caller's tag, comes once every node asked has answered,
// finished, or been lost, or at the query's deadline, naming the nodes that did
// not answer and why; a new generation or the job's end answers the open ones at
// once. At most kMaxOpenQueries are open; a further Ask is answered at once with
// a problem, as is one while no generation runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <boost/json/object.hpp>

#include "base/defaults.hpp"
#include "base/status.hpp"
#include "rendezvous/codec.hpp"
#include "rendezvous/generation.hpp"

namespace dlaunch::rendezvous {

using Clock = std::chrono::steady_clock;
using ConnId = std::uint64_t;

// Ports, caps and exit codes have their home in base/defaults.hpp.
using base::kDefaultMasterPort;
using base::kDefaultRdzvPort;
inline constexpr int kMaxHostLength = 255;                         // a DNS name is at most 253
inline constexpr int kMaxNprocPerNode = base::kMaxWorkersPerNode;  // workers one Join may ask for
inline constexpr int kJobHangExitCode = base::kExitHang;           // a job stopped because it hung
// How long the nodes have to answer a hang's stacks query (defaults.hpp).
inline constexpr std::chrono::milliseconds kHangReportTimeout = base::kStacksAnswerTimeout;
// The most bytes of report items one hang query keeps, over all nodes.
inline constexpr std::size_t kMaxHangReportBytes = std::size_t{64} << 20;
// The most on-demand queries open at once (the live view serves 16 clients).
inline constexpr std::size_t kMaxOpenQueries = 16;
// How long a restart waits for every standing-by node to say its workers are
// gone (their shutdown: SIGTERM, then SIGKILL after --shutdown-timeout) before it
// goes on without that word.
inline constexpr std::chrono::milliseconds kStopAnswerTimeout =
    base::kDefaultShutdownTimeout + std::chrono::seconds(10);
// The most spares one job keeps waiting.
inline constexpr int kMaxSpares = 65536;

// `text` in single quotes for a message, shortened to its first 64 bytes with its
// length when longer ("'aaaa...' (5000 bytes)"), so that a peer's long run id
// cannot make a Refused reason too long to encode, nor flood a log.
std::string QuoteId(std::string_view text);

// The coordinator's side of the handshake of one connection.
struct HandshakeState {
  std::string nonce_agent;        // from Hello
  std::string nonce_coordinator;  // sent in Challenge; empty without a token
};
// Answers a Hello for job `run_id`: the Challenge to send (with the coordinator's
// nonce and proof when `token` is set, empty without), filling `state`. Fails with
// InvalidArgument saying why the agent is refused ("protocol version 2 is not
// supported (this coordinator speaks 3)", "this job needs a token, and the agent
// has none", ...) or the nonce source's error.
Result<Challenge> AnswerHello(const std::string& token, const std::string& run_id, const Hello& hello,
                              const std::function<Result<std::string>()>& nonce_source, HandshakeState& state);
// Ok when `proof` is the agent's proof for `state` under `token`; else
// InvalidArgument "wrong token (proof does not match)".
Status CheckProof(const std::string& token, const std::string& run_id, const HandshakeState& state, const Proof& proof);
// Why `join` is refused by job `run_id`, the problem alone ("join from host 'a':
// nproc 0 is below 1"); empty when its values are fine. Whether its slot is free
// is ClaimSlot's to say (ranks.hpp).
std::string JoinProblem(const Join& join, const std::string& run_id);

// Write `message` to `conn`.
struct Send {
  ConnId conn = 0;
  Message message;
};
// Write each recipient of a generation its Assignment (AssignmentFor), in order.
// One action for the whole generation, not a Send each: the N messages are then
// built one at a time as they are written, instead of all being held at once
// (at 10,000 agents that was a quarter of the coordinator's peak memory:
// bench/profile/coordinator.md).
struct SendAssignments {
  struct To {
    ConnId conn = 0;
    int node_rank = 0;
    bool wants_table = false;
  };
  std::shared_ptr<const Generation> generation;  // never null
  std::vector<To> to;
};
// The job's end: each recipient that joined (`last`) is written last(node_rank),
// then every recipient's connection is closed, one after the other, as a Send
// and a Close each would. One action for the whole job: N of each, all alive at
// once, were the coordinator's peak memory (bench/profile/coordinator.md).
struct Farewell {
  struct To {
    ConnId conn = 0;
    int node_rank = -1;
    bool last = false;
  };
  std::vector<To> to;
  std::function<Message(int node_rank)> last;  // set when any recipient has `last`
  std::string reason;                          // the Closes' reason
};
// Write what is queued for `conn`, then close it. The coordinator has already
// forgotten it, so a later OnDisconnect(conn) is ignored. `reason` is for a debug
// log: the coordinator emits its own Log line for every close that matters.
struct Close {
  ConnId conn = 0;
  std::string reason;
};
// A line for the coordinator's log ("subject: problem (cause)"). `limit` names
// the kind of a line that peers can cause again and again ("ignored messages"):
// the session layer writes a few of each kind and counts the rest
// (log_limit.hpp). Empty: the job's own line, always written.
struct Log {
  std::string line;
  std::string limit;
};
// The job is over: the exit code for the hosting dlaunch, and the one-line
// summary (the root cause when it failed).
struct JobEnded {
  int exit_code = 0;
  std::string summary;
};
// A node of the running generation is gone (it closed, went silent or broke
// the protocol) before it finished: for the hosting dlaunch's --events.
struct NodeLost {
  int node_rank = 0;
  std::string host;
  std::string what;  // "lost (connection closed)", "left", ...
};
// The job's ranks on every node have been silent for `silent` (hang_timeout):
// every running node was asked for its stacks. A HangReport follows.
struct HangSuspected {
  std::chrono::milliseconds silent{0};
  int nodes = 0;  // nodes asked
};
// One node's answer to a query ("stacks" of a hang, or an on-demand one).
struct NodeStacks {
  int node_rank = 0;
  std::string host;
  int first_rank = 0;  // the global rank of its local rank 0
  int nproc = 0;
  bool answered = false;
  std::string problem;             // why not, when not: "no answer within 15s"
  std::vector<std::string> items;  // Report::items as the node sent them, unchecked
};
// The answers to the stacks query of a suspected hang, every node asked by node
// rank. With `stop`, JobEnded with kJobHangExitCode follows in the same actions.
struct HangReport {
  std::chrono::milliseconds silent{0};
  std::vector<NodeStacks> nodes;
  bool stop = false;
};
// The answers to an on-demand query (Coordinator::Ask), every node asked by node
// rank; `problem` says why none was asked ("no generation is running").
struct QueryAnswered {
  std::uint64_t tag = 0;  // the caller's
  std::string what;
  std::vector<NodeStacks> nodes;
  std::string problem;
};
// Something the hosting dlaunch's --events and metrics record about how the job
// recovers: "spare_waiting", "spare_left", "spare_promoted", "ranks_renumbered",
// "standby". The fields are as docs/events.md lists them; `spares`, where an
// event has it, says how many agents wait beyond the running generation now.
struct JobEvent {
  std::string name;
  boost::json::object fields;
};
using Action = std::variant<Send, SendAssignments, Close, Farewell, Log, JobEnded, NodeLost, HangSuspected, HangReport,
                            QueryAnswered, JobEvent>;
// Calls `each` with every plain Send and Close that `action` stands for, in
// order: itself for a Send or a Close, one Send a recipient for SendAssignments,
// a Send (when due) and a Close a recipient for Farewell. Each is built just
// before its call and gone after it. False, with no call, for the other actions.
bool ExpandWrites(const Action& action, const std::function<void(const Action&)>& each);

struct CoordinatorOptions {
  std::string endpoint;  // "head:29400", for messages only
  std::string run_id;    // --rdzv-id; Hello and Join must carry it
  int min_nodes = 1;
  int max_nodes = 1;
  // From the first Join until min_nodes have joined. Default: 600s (torchrun's
  // join_timeout), since the last node may still be pulling its container.
  std::chrono::milliseconds join_timeout{base::kDefaultJoinTimeout};
  // From min_nodes joined until assignment, for more nodes up to max_nodes.
  // Default: 30s (torchrun's last_call_timeout).
  std::chrono::milliseconds last_call_timeout{base::kDefaultLastCallTimeout};
  // A joined agent silent this long is lost. Default: 15s (torchrun's keep-alive:
  // 3 missed beats of 5s). Agents should beat every heartbeat_timeout / 3.
  std::chrono::milliseconds heartbeat_timeout{base::kDefaultHeartbeatTimeout};
  // A connection must Join within this. Default: 10s.
  std::chrono::milliseconds handshake_timeout{base::kHandshakeTimeout};
  int max_restarts = 0;  // --max-restarts, across the whole job
  // --max-no-progress-restarts (-1: off) and --restart-backoff (0 and 0: none):
  // restart_policy.hpp's rules, with max_restarts.
  int max_no_progress_restarts = -1;
  std::chrono::milliseconds backoff_min{0};
  std::chrono::milliseconds backoff_max{0};
  // --spares: up to this many agents that join a job already at max_nodes wait
  // as spares instead of being refused, and replace a lost node at once.
  int spares = 0;
  std::string token;  // "" = no authentication
  // --nodes / --hostfile: node rank = position. Empty, or exactly max_nodes hosts.
  std::vector<std::string> node_list;
  int master_port = 0;  // 0: node rank 0's master_port_hint, else kDefaultMasterPort
  // --hang-timeout: no rank on any node wrote for this long -> HangSuspected and
  // a stacks query. Default: 0, off.
  std::chrono::milliseconds hang_timeout{0};
  bool hang_stop = false;  // --hang-action stop: after the HangReport, end the job
  // Where Challenge nonces come from. Default: RandomNonce().
  std::function<Result<std::string>()> nonce_source;
};

// InvalidArgument naming the first bad option, e.g.
// "--nnodes: minimum 3 is above maximum 2".
Status Validate(const CoordinatorOptions& options);

// "30s" for whole seconds, else "1500ms".
std::string FormatDuration(std::chrono::milliseconds d);

class Coordinator {
 public:
  enum class State { kGathering, kRunning, kEnded };

  // `options` must pass Validate().
  explicit Coordinator(CoordinatorOptions options);

  // `peer` names the connection in log lines ("10.0.0.2:51234").
  std::vector<Action> OnConnect(ConnId conn, std::string peer, Clock::time_point now);
  // A connection whose session layer already answered `hello` and checked the proof
  // (AnswerHello, CheckProof with this job's token): its next message must be Join,
  // within handshake_timeout of `now`. Refused like OnConnect once the job ended.
  std::vector<Action> OnAuthenticated(ConnId conn, std::string peer, Clock::time_point now);
  std::vector<Action> OnMessage(ConnId conn, const Message& message, Clock::time_point now);
  // The peer closed, or the connection failed.
  std::vector<Action> OnDisconnect(ConnId conn, Clock::time_point now);
  // The decoder refused the peer's bytes (FrameDecoder::Next's error): drop it.
  std::vector<Action> OnProtocolError(ConnId conn, const Status& error, Clock::time_point now);
  // Time passed: deadlines of the handshake, join, last call and heartbeats.
  // `unread(conn)` says whether bytes from that agent wait unread in this
  // process: then an agent silent for heartbeat_timeout is not lost, this
  // process is behind (starved of CPU, or was stopped) and counts it as heard now.
  using UnreadInput = std::function<bool(ConnId)>;
  std::vector<Action> OnTick(Clock::time_point now, const UnreadInput& unread = {});

  // Ends the job from outside, e.g. a head-node launcher that lost a node before
  // it joined, or was told to stop: every joined agent gets Abort{cause, code}.
  // Nothing when the job has already ended.
  std::vector<Action> AbortJob(int code, const std::string& cause);

  // Asks every running node `what` ("status", "stacks"); QueryAnswered{tag}
  // follows, now or from a later call, within `timeout` of `now`.
  std::vector<Action> Ask(std::uint64_t tag, const std::string& what, std::chrono::milliseconds timeout,
                          Clock::time_point now);

  // The earliest deadline OnTick acts on; nullopt when none. Linear in the number
  // of connections: a session layer with many agents may tick on a fixed period.
  std::optional<Clock::time_point> NextDeadline() const;

  State state() const;
  int generation() const;
  int restart_count() const;
  // The node table of the current generation (empty before the first).
  const std::vector<envmap::Node>& nodes() const;
  // The connections it holds: handshaking, waiting or assigned.
  std::size_t connections() const;

  // Movable (the parts stay where they are), not copyable.
  Coordinator(Coordinator&&) noexcept;
  Coordinator& operator=(Coordinator&&) noexcept;
  ~Coordinator();

 private:
  // The rendezvous core, the hang detector and the query router, wired
  // (coordinator.cpp).
  struct Parts;
  std::unique_ptr<Parts> parts_;
};

}  // namespace dlaunch::rendezvous
