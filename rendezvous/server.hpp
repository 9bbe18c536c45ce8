// The Asio session that hosts coordinators: accepts agents on the endpoint,
// routes each connection to the job its Hello names (Hello::run_id), feeds that
// job's Coordinator what happens, and carries out the actions it returns.
//
// Inside a dlaunch that hosts its own job, the server serves that one job. As
// `dlaunch coordinator --listen ADDR:PORT` it serves many, creating a job from
// the first Hello of each run id. All of it runs on one io_context thread.
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

#include "envmap/status.hpp"
#include "rendezvous/connection.hpp"
#include "rendezvous/coordinator.hpp"

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
                                                          const std::string& what, JobFactory factory,
                                                          LogSink log);
  // The factory of a dlaunch hosting its own job: `options`, for its run id only.
  static JobFactory OneJob(CoordinatorOptions options);
  ~CoordinatorServer();

  // Ends every job with Abort{cause, code} to its agents, and refuses every
  // Hello from now on with `cause`.
  void AbortAll(int code, const std::string& cause);

  // The last job that ended, if any.
  const std::optional<JobEnded>& ended() const { return ended_; }
  // A job has ended and every connection has written its last bytes.
  bool Flushed() const;
  int port() const;
  size_t jobs() const { return jobs_.size(); }

 private:
  struct Pending {
    std::shared_ptr<Connection> conn;
    Clock::time_point since;
  };

  CoordinatorServer(boost::asio::io_context& io, JobFactory factory, LogSink log);
  void Accept();
  void OnFirstMessage(ConnId id, Message message);
  void OnClosed(ConnId id, const Status& why);
  // `run_id` is a copy: the actions may erase the route it came from.
  void Apply(std::string run_id, std::vector<Action> actions);
  void Tick();

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer ticker_;
  JobFactory factory_;
  LogSink log_;
  std::map<std::string, std::unique_ptr<Coordinator>> jobs_;
  std::map<ConnId, std::shared_ptr<Connection>> conns_;
  std::map<ConnId, std::string> route_;   // connection -> run id, after its Hello
  std::map<ConnId, Clock::time_point> unrouted_;  // connected, no Hello yet
  std::vector<std::weak_ptr<Connection>> all_;    // outlive conns_ while flushing
  ConnId next_id_ = 1;
  std::optional<JobEnded> ended_;
  std::optional<std::string> aborted_;  // why new agents are refused
  std::chrono::milliseconds hello_timeout_{10000};  // Default: 10s, as the handshake
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace dlaunch::rendezvous
