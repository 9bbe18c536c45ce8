// The Asio session that hosts a Coordinator: accepts agents on the endpoint,
// feeds the state machine what happens, and carries out the actions it returns.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

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

  // Listens on `listen` (its address only, not every interface). Returns
  // InvalidArgument "--rdzv-endpoint HOST:PORT: cannot listen (Address already in
  // use)" and the like, naming `what`.
  static Result<std::unique_ptr<CoordinatorServer>> Start(boost::asio::io_context& io, const HostPort& listen,
                                                          const std::string& what, CoordinatorOptions options,
                                                          LogSink log);
  ~CoordinatorServer();

  // Set once the job has ended (every agent got Done or Abort).
  const std::optional<JobEnded>& ended() const { return ended_; }
  const Coordinator& coordinator() const { return coordinator_; }
  // The job has ended and every connection has written its last bytes.
  bool Flushed() const;
  int port() const;

 private:
  CoordinatorServer(boost::asio::io_context& io, CoordinatorOptions options, LogSink log);
  void Accept();
  void Apply(std::vector<Action> actions);
  void Tick();

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer ticker_;
  Coordinator coordinator_;
  LogSink log_;
  std::map<ConnId, std::shared_ptr<Connection>> conns_;
  std::vector<std::weak_ptr<Connection>> all_;  // outlive conns_ while flushing
  ConnId next_id_ = 1;
  std::optional<JobEnded> ended_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace dlaunch::rendezvous
