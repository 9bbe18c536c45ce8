// The live view of a running job: `dlaunch status` and `dlaunch stacks` ask a
// running dlaunch over a Unix socket that only its user can open. Nothing
// listens on the network for this.
//
// Where: LiveDir(): $XDG_RUNTIME_DIR/dlaunch when that variable names a usable
// directory (absolute, a directory of this user's, not a symlink), else
// /dev/shm/dlaunch-UID, else /tmp/dlaunch-UID (DefaultTempParent: each job
// binds a socket there, which on a tmpfs touches no disk). OpenLiveDir creates it 0700 and refuses one that exists but
// is a symlink, not this user's, or open to group or others. Each dlaunch
// listens on DIR/RUNID.PID.sock (mode 0600; several dlaunch of one run id on one
// machine, as loopback multi-node agents are, get one each), removed when it ends.
//
// The protocol: the client sends one line, "status\n" or "stacks\n"; the server
// answers with one JSON document and closes. The server is bounded: a request
// line of at most 64 bytes within 2 s, a reply taken within 5 s, at most 16
// clients at once (the next are told they are busy and closed), and a peer of
// another uid (root aside) is closed unanswered (LiveServerOptions).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/object.hpp>

#include "envmap/layout.hpp"
#include "base/status.hpp"
#include "launcher/core/event_loop.hpp"
#include "launcher/process/runner.hpp"
#include "rendezvous/accept_retry.hpp"

namespace dlaunch::launcher {

// The server's bounds.
struct LiveServerOptions {
  size_t max_clients = 16;                          // Default: 16 served at once; the next told "busy"
  size_t max_request = 64;                          // Default: 64 bytes, the longest request line
  std::chrono::milliseconds request_timeout{2000};  // Default: 2s for a client to send its line
  std::chrono::milliseconds answer_timeout{30000};  // Default: 30s for the source (gdb stacks take up to 10 s)
  std::chrono::milliseconds reply_timeout{5000};    // Default: 5s a client may take nothing of its reply
};

// The per-user directory: $XDG_RUNTIME_DIR/dlaunch when XDG_RUNTIME_DIR (in
// `env`) is an absolute path to a directory of `uid`'s that is not a symlink,
// else /tmp/dlaunch-UID.
std::string LiveDir(const envmap::EnvMap& env, uid_t uid);
// Creates `dir` with mode 0700 when missing. InvalidArgument naming it when it is
// a symlink, not a directory, not `uid`'s, or open to group or others; Io when it
// cannot be created.
Status OpenLiveDir(const std::string& dir, uid_t uid);
// The checks of OpenLiveDir without creating anything, for the client: NotFound
// when `dir` does not exist.
Status CheckLiveDir(const std::string& dir, uid_t uid);
// A socket's file name: the run id with bytes outside [A-Za-z0-9._-] as '_', cut
// so that the path fits a Unix socket address, then ".PID.sock".
std::string LiveSocketName(const std::string& dir, const std::string& run_id, int pid);
// The pid in a socket's file name ("job.7.sock" -> 7); nullopt when it has none.
std::optional<int> LiveSocketPid(const std::string& file_name);
// The file-name prefix of `run_id`'s sockets ("job." for "job").
std::string LiveSocketPrefix(const std::string& dir, const std::string& run_id);

// What the server asks for; every call happens on the event loop's thread, and
// each reply runs at most once, on the loop, later or at once. A reply that
// never comes costs the client its wait (answer_timeout), nothing more.
class LiveSource {
 public:
  virtual ~LiveSource() = default;
  // {"run_id", "pid", "started", "command", "ranks", "rows": [WorkerRun::Rows() of each node]}
  virtual void Status(std::function<void(boost::json::object)> reply) = 0;
  // {"run_id", "pid", "stacks": [ToJson(RankStack) of every running rank]}
  virtual void Stacks(std::function<void(boost::json::object)> reply) = 0;
  // The process hosting a multi-node job's coordinator answers both for every
  // node, adding "job_wide": true and "missing": [a line per node not heard
  // from] (launcher/live/job_live.hpp); the client then shows that reply
  // rather than the nodes' own of the same run id.
};

// The job, as a listing shows it.
struct LiveJob {
  std::string run_id;
  std::string started;               // UTC, RFC 3339
  std::vector<std::string> command;  // the worker's argv
  int ranks = 0;                     // on this node
};

// This node's workers: the run of the current generation, or none (between
// rendezvous generations, or before the first).
class RunLiveSource : public LiveSource {
 public:
  explicit RunLiveSource(LiveJob job) : job_(std::move(job)) {}
  // `run` (or null) serves from now on; it must stay alive until replaced.
  void SetRun(WorkerRun* run) { run_ = run; }
  // The run that serves now, or null; the metrics read its rows too.
  WorkerRun* run() const { return run_; }
  const LiveJob& job() const { return job_; }
  void Status(std::function<void(boost::json::object)> reply) override;
  void Stacks(std::function<void(boost::json::object)> reply) override;

 private:
  boost::json::object Header() const;
  LiveJob job_;
  WorkerRun* run_ = nullptr;
};

// Serves a LiveSource on a Unix socket on the event loop.
class LiveServer {
 public:
  // Listens at `path` (an older socket file there is replaced) with mode 0600.
  // Io naming the path when it cannot. `source` must outlive the server. `log`
  // gets one line when accepting fails for want of descriptors, and one when it
  // works again.
  static Result<std::unique_ptr<LiveServer>> Start(boost::asio::io_context& io, const std::string& path,
                                                   LiveSource& source, std::function<void(const std::string&)> log,
                                                   LiveServerOptions options = {});
  // Closes every client and removes the socket file.
  ~LiveServer();
  LiveServer(const LiveServer&) = delete;
  LiveServer& operator=(const LiveServer&) = delete;

  size_t clients() const { return sessions_.size(); }

 private:
  struct Session;
  LiveServer(boost::asio::io_context& io, std::string path, LiveSource& source,
             std::function<void(const std::string&)> log, LiveServerOptions options);
  void Accept();
  void ReadRequest(uint64_t id);
  void Answer(uint64_t id, const std::string& request);
  void Reply(uint64_t id, std::string body);
  // Writes what is left of the reply, then closes; a reader that takes nothing for reply_timeout is dropped.
  void WriteReply(uint64_t id);
  void Drop(uint64_t id);
  void Arm(uint64_t id, std::chrono::milliseconds limit);

  boost::asio::io_context& io_;
  std::string path_;
  LiveSource& source_;
  std::function<void(const std::string&)> log_;
  LiveServerOptions options_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  rendezvous::AcceptRetry accept_retry_;
  // Shared with the handlers of each session's pending operations: Asio's
  // composed read touches the session's buffer once more when it is cancelled.
  std::map<uint64_t, std::shared_ptr<Session>> sessions_;
  uint64_t next_id_ = 1;
  Lifetime life_;  // last: expires first
};

}  // namespace dlaunch::launcher
