// The Asio session that hosts coordinators: accepts agents on the endpoint,
// shakes hands with each connection itself (Hello, Challenge, Proof, with the
// token of the job its Hello names), and only on the authenticated Join routes it
// to that job's Coordinator, creating the job if it is new. So a peer without the
// token never creates a job, never sizes one, and never reaches a running one.
// Then it feeds the job's Coordinator what happens and carries out the actions it
// returns.
//
// Inside a dlaunch that hosts its own job, the server serves that one job. As
// `dlaunch coordinator --listen ADDR:PORT` it serves many, creating a job from the
// first authenticated Join of each run id, sized by that agent's Hello. All of it
// runs on one io_context thread.
//
// Faults it absorbs: a connection that does not Join within 10s is dropped; drop
// lines ("rendezvous HOST:PORT: refused PEER (why)") and a job's lines that its
// peers cause (Log::limit) are rate-limited per kind (log_limit.hpp: the first
// kPeerLogBurst in each kPeerLogWindow, then one line with the count of the
// others); a refused agent gets Refused{"rendezvous HOST:PORT: why"}; when accept() fails for want of resources
// (EMFILE, ENFILE, ENOBUFS, ENOMEM) it logs once, retries after 100ms, doubling up to 1s, and logs again once it
// accepts. A job whose --nnodes maximum needs more descriptors than the soft RLIMIT_NOFILE allows raises it to the hard
// limit, and when even that is short, one line says how many agents it allows (fd_limit.hpp), once.
//
// The cost of an agent is O(1) and, idle, a few hundred bytes (bench/SCALE.md):
// no per-connection timer (one ticker serves every deadline), no read buffer of
// its own (connection.hpp), and no walk over every connection on each tick.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/status.hpp"
#include "rendezvous/connection.hpp"
#include "rendezvous/coordinator.hpp"
#include "rendezvous/accept_retry.hpp"
#include "rendezvous/awake_clock.hpp"
#include "rendezvous/log_limit.hpp"

namespace dlaunch::rendezvous {

// How often deadlines are checked. Default: 50ms (a tenth of the smallest
// timeout worth setting).
inline constexpr std::chrono::milliseconds kTickPeriod{50};

class CoordinatorServer {
 public:
  using LogSink = std::function<void(const std::string& line)>;
  // The options of a job that a Hello asks for, or why it cannot be served
  // (sent to the agent as Refused).
  using JobFactory = std::function<Result<CoordinatorOptions>(const Hello& hello)>;

  // Listens on `listen` (its address only, not every interface). Returns
  // InvalidArgument "--rdzv-endpoint HOST:PORT: cannot listen (Address already in
  // use)" and the like, naming `what`.
  static Result<std::unique_ptr<CoordinatorServer>> Start(boost::asio::io_context& io, const HostPort& listen,
                                                          const std::string& what, JobFactory factory, LogSink log);
  // The factory of a dlaunch hosting its own job: `options`, for its run id only.
  // It is called for each Hello, but a job is created only on an authenticated Join.
  static JobFactory OneJob(CoordinatorOptions options);
  ~CoordinatorServer();

  // Forgets a job (without a word to anyone: no agent is there) once no agent has
  // been connected to it for `after`, so abandoned jobs do not pile up. Off unless
  // called; `dlaunch coordinator` sets it to the join timeout.
  void ExpireAbandonedJobs(std::chrono::milliseconds after) { expire_after_ = after; }

  // Ends every job with Abort{cause, code} to its agents, and refuses every
  // Hello from now on with `cause`.
  void AbortAll(int code, const std::string& cause);

  // The last job that ended, if any.
  const std::optional<JobEnded>& ended() const { return ended_; }
  // `hook` runs on the io_context (posted, never from inside the server) each
  // time a job ends, after ended() says so.
  void OnJobEnded(std::function<void(const JobEnded&)> hook) { on_ended_ = std::move(hook); }
  // Whether the log sink gets each job's end summary (default: yes). A node
  // that hosts its own job's coordinator says the summary itself, once.
  void LogJobEnds(bool on) { log_job_ends_ = on; }
  // Runs `hook`, in the handler that noticed it, for each node a job lost.
  void OnNodeLost(std::function<void(const NodeLost&)> hook) { on_node_lost_ = std::move(hook); }
  // Runs `hook`, in the handler that noticed it, for each recovery event of a
  // job (JobEvent: spares, standbys, renumbered ranks).
  void OnJobEvent(std::function<void(const JobEvent&)> hook) { on_job_event_ = std::move(hook); }
  // Run, in the handler that noticed it, for each hang a job suspects and each
  // report of one (coordinator.hpp), with the job's run id. A report with `stop`
  // is followed by the job's end (OnJobEnded).
  struct HangHooks {
    std::function<void(const std::string& run_id, const HangSuspected&)> suspected;
    std::function<void(const std::string& run_id, const HangReport&)> report;
  };
  void OnHang(HangHooks hooks) { on_hang_ = std::move(hooks); }
  // Asks every running node of job `run_id` `what` (Coordinator::Ask); every
  // hook (OnQueryAnswered) gets the answer with `tag`, posted to the io_context,
  // within `timeout` (at once, with a problem, when there is no such job). Each
  // asker keeps to tags of its own and ignores the others'.
  void Ask(const std::string& run_id, std::uint64_t tag, const std::string& what, std::chrono::milliseconds timeout);
  void OnQueryAnswered(std::function<void(const QueryAnswered&)> hook) { on_answered_.push_back(std::move(hook)); }
  // A job has ended and every connection has written its last bytes.
  bool Flushed() const;
  int port() const;
  size_t jobs() const { return jobs_.size(); }

  // What the server has seen since it started, for the metrics
  // (launcher/metrics/metrics.hpp): counts of events that happen inside it and
  // that no hook reports.
  struct Counters {
    std::uint64_t hellos = 0;  // Hellos received: attempts to join, refused or not
    // Refused for the token: none when one is needed, a wrong proof, or a peer that
    // hung up after the challenge instead of proving (an agent with another token
    // does: it checks the coordinator's proof before sending its own).
    std::uint64_t auth_refused = 0;
    std::uint64_t joined = 0;      // authenticated Joins handed to a job
    std::uint64_t nodes_lost = 0;  // nodes lost by every job (NodeLost)
    std::uint64_t spares = 0;      // spares waiting, over every job, as the last JobEvent of each said
  };
  const Counters& counters() const { return counters_; }

 private:
  // A connection that has not joined a job yet.
  struct Lobby {
    Clock::time_point since;
    std::optional<Hello> hello;  // once it said Hello
    // Of the job its Hello asks for; the factory runs again at the Join rather than
    // each idle connection holding a copy of the options (node lists included).
    std::string token;
    HandshakeState handshake;
    bool proven = false;  // its Proof checked out (or no token)
  };

  CoordinatorServer(boost::asio::io_context& io, JobFactory factory, LogSink log);
  void Accept();
  // Accept failed with `ec`: retry now, or later with back-off.
  void OnLobbyMessage(ConnId id, Message message);
  // Sends Refused{why} to a connection of the lobby, closes it, and logs (rate-limited).
  void RefuseInLobby(ConnId id, const std::string& why);
  void OnClosed(ConnId id, const Status& why);
  // Raises the fd limit when a job of up to `max_nodes` agents needs it; says once
  // when it cannot.
  void MakeFdRoom(const std::string& run_id, int max_nodes);
  // Sends `message` unless it cannot be encoded: then logs why and closes `conn`.
  void SendTo(Connection& conn, const Message& message);
  // A log line for a dropped connection, rate-limited with the other drops.
  void LogDrop(const std::string& line, Clock::time_point now);
  void ExpireJobs(Clock::time_point now);
  // `run_id` is a copy: the actions may erase the route it came from.
  void Apply(std::string run_id, std::vector<Action> actions);
  void Tick();

  std::function<void(const JobEnded&)> on_ended_;
  std::function<void(const NodeLost&)> on_node_lost_;
  std::function<void(const JobEvent&)> on_job_event_;
  std::map<std::string, std::uint64_t> spares_;  // run id -> its spares, for Counters::spares
  HangHooks on_hang_;
  std::vector<std::function<void(const QueryAnswered&)>> on_answered_;
  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer ticker_;
  AwakeClock clock_;  // every time given to the jobs: a frozen job is not a silent one
  JobFactory factory_;
  LogSink log_;
  bool log_job_ends_ = true;
  std::map<std::string, std::unique_ptr<Coordinator>> jobs_;
  std::map<ConnId, std::shared_ptr<Connection>> conns_;
  std::map<ConnId, std::string> route_;         // connection -> run id, after its Join
  std::map<ConnId, Lobby> lobby_;               // connected, not joined yet
  std::vector<std::weak_ptr<Connection>> all_;  // outlive conns_ while flushing
  std::size_t swept_size_ = 64;                 // all_ is swept at twice this
  bool fd_warned_ = false;                      // the fd limit's line was said
  ConnId next_id_ = 1;
  std::optional<JobEnded> ended_;
  std::optional<std::string> aborted_;              // why new agents are refused
  std::chrono::milliseconds hello_timeout_{10000};  // Default: 10s, as the handshake
  std::optional<std::chrono::milliseconds> expire_after_;
  std::map<std::string, Clock::time_point> idle_since_;  // jobs with no connection, since when
  AcceptRetry accept_retry_;
  LogLimiter peer_log_;  // the lines peers cause: drops, and the jobs' limited Log lines
  Counters counters_;
  std::string subject_ = "rendezvous";  // "rendezvous HOST:PORT" once listening
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace dlaunch::rendezvous
