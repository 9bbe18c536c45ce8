// The rendezvous agent: this node's side of a multi-node job. It joins the
// coordinator, receives the node table, and then sits between the local workers
// and the job (launcher/runner.hpp's JobChannel): a local failure goes out, an
// abort comes in, and the node's exit waits for the job's exit barrier.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/runner.hpp"
#include "rendezvous/codec.hpp"
#include "rendezvous/connection.hpp"

namespace dlaunch::launcher {

struct AgentOptions {
  rendezvous::HostPort endpoint;
  std::string token;  // empty: no authentication
  rendezvous::Join join;
  int min_nodes = 1;  // the job's spec, for a stand-alone coordinator
  int max_nodes = 1;
  int max_restarts = 0;
  std::chrono::milliseconds join_timeout{std::chrono::seconds(600)};     // Default: 600s, as torchrun
  std::chrono::milliseconds heartbeat_interval{std::chrono::seconds(1)};  // Default: 1s
  std::chrono::milliseconds heartbeat_timeout{std::chrono::seconds(5)};   // Default: 5s
  // Do not print the coordinator's abort reason (the hosting node logs it already).
  bool quiet_abort = false;
};

class Agent : public JobChannel {
 public:
  Agent(boost::asio::io_context& io, AgentOptions options);
  ~Agent() override;

  // Connects, authenticates and joins; runs the io_context until an assignment
  // arrives. Fails with the coordinator's reason (a join timeout, a refusal) or
  // "rendezvous HOST:PORT: ..." for a connection problem.
  Result<rendezvous::Assignment> WaitAssignment();

  // After a run that ended in a failure: true when the coordinator restarts the
  // job, in which case WaitAssignment() returns the next generation.
  bool restart_pending() const { return restart_pending_; }

  // JobChannel.
  void Attach(std::function<void(int, const std::string&)> abort) override;
  void LocalFailure(int rank, int code, const std::string& reason) override;
  void LocalDone(int code, std::function<void(int)> finish) override;

 private:
  void OnMessage(rendezvous::Message message);
  void OnLost(const std::string& why);
  void ArmHeartbeat();
  std::string Subject() const { return "rendezvous " + options_.endpoint.ToString(); }

  boost::asio::io_context& io_;
  AgentOptions options_;
  std::shared_ptr<rendezvous::Connection> conn_;
  boost::asio::steady_timer heartbeat_timer_;
  std::chrono::steady_clock::time_point last_heard_;
  std::string nonce_;
  bool challenged_ = false;  // a Challenge passed (with a token: its proof verified)
  std::optional<rendezvous::Assignment> assignment_;
  std::optional<Status> join_error_;
  int generation_ = 0;
  int node_rank_ = -1;
  bool restart_pending_ = false;
  bool aborted_ = false;
  std::function<void(int, const std::string&)> abort_;
  std::function<void(int)> finish_;
  std::optional<int> pending_exit_;  // Done or Abort that came before LocalDone
};

}  // namespace dlaunch::launcher
