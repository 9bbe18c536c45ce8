// The rendezvous wire format: framed, versioned binary messages.
//
// A frame is a 12-byte header and a payload:
//
//   magic "DLRV" (4) | version u8 | type u8 | reserved u16 (0) | payload length u32 | payload
//
// Integers are big-endian; ints are signed 32-bit. A string is a u32 length and its
// bytes, a list a u32 count and its items. Every field has a name, which rejection
// reasons quote. Nothing here touches a socket or allocates more than the hard caps
// allow: the payload is capped at kMaxPayload and a header announcing more is
// refused before any of its payload is buffered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "envmap/layout.hpp"
#include "base/status.hpp"

namespace dlaunch::rendezvous {

inline constexpr char kMagic[4] = {'D', 'L', 'R', 'V'};
// 2: Join::wants_table and Assignment's nnodes, rank_offset and world_size.
// 3: mutual authentication: Challenge::proof, the coordinator's own proof, and a
//    label per direction in every proof (auth.hpp). A version-2 agent would accept
//    a coordinator that proves nothing, so the two must not talk.
// 4: job-wide hang detection (--hang-timeout across nodes): Hello::hang_timeout_ms
//    and hang_stop, Heartbeat::silent_ms, and the Query and Report messages. A
//    version-3 agent would never say how long its ranks have been silent, so the
//    coordinator would think the job always busy.
// 5: surviving bad nodes: Hello carries the job's spares, no-progress limit and
//    restart backoff (for a stand-alone coordinator), Heartbeat each local
//    rank's progress, and Standby stops a generation's workers without ending
//    the job. A version-4 agent would never report progress, so every restart
//    would look like one without it.
inline constexpr std::uint8_t kProtocolVersion = 5;
// How a frame of another protocol version is refused: "frame: unsupported
// version 5 (expected 4)". An agent tells a dlaunch of another version by it.
inline constexpr std::string_view kVersionProblem = "frame: unsupported version";
inline constexpr std::size_t kHeaderSize = 12;
inline constexpr std::uint32_t kMaxPayload = 1u << 20;  // 1 MiB: a 10,000-node table fits
inline constexpr std::uint32_t kMaxString = 4096;       // bytes in one string field
inline constexpr std::uint32_t kMaxListItems = 65536;   // items in one list field

// Agent -> coordinator, first: the protocol it speaks, the job it wants and a fresh
// nonce (kNonceSize random bytes when the coordinator has a token).
struct Hello {
  int version = kProtocolVersion;
  std::string run_id;
  std::string nonce;
  // The job as this agent was told it (--nnodes, --max-restarts). A stand-alone
  // coordinator sizes a new job from the Hello of the first agent that proves the
  // token and joins; later agents join the job as it is.
  int min_nodes = 1;
  int max_nodes = 1;
  int max_restarts = 0;
  // --hang-timeout in ms (0: off) and --hang-action (1: stop, 0: report), taken by
  // a stand-alone coordinator like the size. An agent caps the timeout at INT_MAX ms.
  int hang_timeout_ms = 0;
  int hang_stop = 0;
  // --spares, --max-no-progress-restarts (-1: off) and --restart-backoff in ms
  // (0 and 0: none), taken by a stand-alone coordinator like the size.
  int spares = 0;
  int max_no_progress_restarts = -1;
  int backoff_min_ms = 0;
  int backoff_max_ms = 0;

  bool operator==(const Hello&) const = default;
};
// Coordinator -> agent: its own nonce and its proof that it holds the token,
// ProofFor(token, Prover::kCoordinator, hello nonce, this nonce, run id). Both
// empty: no token is set, send Join directly. An agent with a token accepts only a
// nonce of kNonceSize bytes and a proof that verifies.
struct Challenge {
  std::string nonce;
  std::string proof;

  bool operator==(const Challenge&) const = default;
};
// Agent -> coordinator: ProofFor(token, Prover::kAgent, hello nonce, challenge
// nonce, run id), sent only after the Challenge's proof verified.
struct Proof {
  std::string mac;

  bool operator==(const Proof&) const = default;
};
// Agent -> coordinator: what this node is and which rank it asks for.
struct Join {
  std::string run_id;
  std::string host;                // a name for people; not unique (namespaces share one)
  std::vector<std::string> addrs;  // where others reach it, preferred first; never empty
  int nproc = 1;
  int gpus = 0;
  int requested_node_rank = -1;  // --node-rank, -1 none
  int list_position = -1;        // its position in --nodes/--hostfile, -1 none
  int master_port_hint = 0;      // a port free on this node for MASTER_PORT, 0 none
  std::vector<int> task_ports;   // one free port per local worker (TF_CONFIG), or empty
  // 1: the Assignment carries the whole node table (for TF_CONFIG and Azure ML's
  // hostfile); 0: only this node's row. With n nodes the whole table costs O(n^2)
  // bytes across the job: 3 GB at 10,000 nodes.
  int wants_table = 1;

  bool operator==(const Join&) const = default;
};
// Coordinator -> agent: one generation of the job. `nodes` is the full node table
// (index = node rank) when the agent's Join asked for it, so that it can write
// TF_CONFIG and hostfiles; else only the agent's own row, and nnodes, rank_offset
// and world_size say the rest. One with a newer generation while workers run
// means: tear them down and run this one.
struct Assignment {
  int generation = 0;
  int node_rank = 0;
  std::vector<envmap::Node> nodes;
  std::string master_addr;
  int master_port = 0;
  std::string run_id;
  int restart_count = 0;
  int nnodes = 0;       // nodes in the job
  int rank_offset = 0;  // global rank of this node's local rank 0
  int world_size = 0;   // worker processes in the job
};
// Both ways while joined: agent -> coordinator keeps it alive; the coordinator
// answers each one, so an agent notices a lost coordinator within its own timeout.
// `silent_ms` (agent -> coordinator): milliseconds since any of this node's ranks
// last wrote a byte, capped at INT_MAX; 0 when none runs. `progress` (agent ->
// coordinator, while running): each local rank's largest number in its progress
// file this generation, by local rank, -1 where it wrote none; empty when the
// node runs no ranks. The coordinator's answer carries 0 and no progress.
struct Heartbeat {
  int silent_ms = 0;
  std::vector<std::int64_t> progress;

  bool operator==(const Heartbeat&) const = default;
};
// Agent -> coordinator: a worker of `generation` failed. `code` is the shell code
// (128+N for signal N); `reason` says how, e.g. "exited with code 3".
struct WorkerFailed {
  int generation = 0;
  int node_rank = 0;
  int rank = 0;
  int code = 1;
  std::string reason;

  bool operator==(const WorkerFailed&) const = default;
};
// Coordinator -> agent: tear down and exit with `code`; `reason` is the job's root cause.
struct Abort {
  std::string reason;
  int code = 1;

  bool operator==(const Abort&) const = default;
};
// Agent -> coordinator: every local worker of `generation` finished. Coordinator ->
// agent: the exit barrier passed, exit with `exit_code` (node_rank -1: the job
// finished without this late node).
struct Done {
  int generation = 0;
  int node_rank = 0;
  int exit_code = 0;

  bool operator==(const Done&) const = default;
};
// Agent -> coordinator: this node is going away on purpose.
struct Leave {
  int node_rank = -1;

  bool operator==(const Leave&) const = default;
};
// Coordinator -> agent, then it closes: why the agent was not accepted.
struct Refused {
  std::string reason;

  bool operator==(const Refused&) const = default;
};

// Coordinator -> agent: answer with a Report of the same `id`. `what` is "stacks"
// (every local rank's stack) or "status" (a row per local rank); an agent answers
// anything else with an empty Report.
struct Query {
  int id = 0;
  std::string what;

  bool operator==(const Query&) const = default;
};
// Agent -> coordinator: the answer to Query `id`, one item per local rank, each a
// JSON object. The agent shortens items (fewer frames, cut text) so that the
// Report fits the caps above rather than failing to encode.
struct Report {
  int id = 0;
  int node_rank = 0;
  std::vector<std::string> items;

  bool operator==(const Report&) const = default;
};

// Coordinator -> agent: stop the workers of `generation` and stay joined; the
// next Assignment comes once the job can go on (a lost node was replaced, or a
// restart's backoff passed). `reason` is the line the node prints.
struct Standby {
  int generation = 0;
  std::string reason;

  bool operator==(const Standby&) const = default;
};

// The wire type of each message is its index in this variant plus one.
using Message = std::variant<Hello, Challenge, Proof, Join, Assignment, Heartbeat, WorkerFailed, Abort, Done, Leave,
                             Refused, Query, Report, Standby>;

// envmap::Node has no operator==, so Assignment spells its own out.
bool operator==(const Assignment& a, const Assignment& b);

// The wire type (1..14) and its name ("hello", "worker-failed", ...).
std::uint8_t TypeOf(const Message& message);
std::string_view TypeName(const Message& message);

// The bytes of the payload alone, without encoding it.
std::size_t PayloadSize(const Message& message);

// Ok when `message` can be encoded: every string within kMaxString bytes, every
// list within kMaxListItems and the payload within kMaxPayload. Otherwise
// InvalidArgument naming the first field over its cap, e.g. "frame: string
// 'run_id' of hello is 5000 bytes, over its cap of 4096".
Status CheckEncodable(const Message& message);

// One whole frame. Never truncates: a message that fails CheckEncodable is a
// programmer error and throws std::length_error with CheckEncodable's message, so
// a caller that sends anything that grows (peer-supplied text, a run id, the node
// table) checks CheckEncodable first and handles the error.
std::string Encode(const Message& message);

// Splits a byte stream into messages, for one connection. Feed bytes as they
// arrive, then call Next() until it returns nullopt (need more bytes) or an error.
// A header is checked as soon as its bytes are there, so garbage and an oversized
// length are refused without waiting for (or buffering) a payload; a caller that
// feeds at most N bytes between Next() calls buffers at most one header, one
// payload under the cap and N. The first error is final: the stream cannot be
// resynchronised and Next() keeps returning it. Errors are InvalidArgument, e.g.
// "frame: bad magic 0x47455420 (expected 0x444c5256)". Once every byte fed has
// been decoded it holds no heap memory. Not thread-safe.
class FrameDecoder {
 public:
  void Feed(std::string_view bytes);
  Result<std::optional<Message>> Next();
  // Bytes fed and not yet consumed.
  std::size_t buffered() const { return buffer_.size() - pos_; }

 private:
  std::string buffer_;
  std::size_t pos_ = 0;
  Status error_;
};

}  // namespace dlaunch::rendezvous
