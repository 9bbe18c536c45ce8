// The agents of a head-node launch (head.hpp), run to the end on the event
// loop: each node's launcher (ssh, pdsh or sh) started with its stdin, its
// output relayed whole-line, its exit reaped; a stop signal or a failure ends
// the job on every node through the coordinator, and the launchers are killed
// only when an agent does not finish within the shutdown timeout.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/config/plan.hpp"
#include "launcher/core/console.hpp"
#include "launcher/core/event_loop.hpp"
#include "launcher/core/output.hpp"
#include "launcher/jobwide/job_hang.hpp"
#include "launcher/process/process.hpp"
#include "launcher/process/streams.hpp"
#include "rendezvous/server.hpp"

namespace dlaunch::launcher {

// The agents of a head-node launch, run to the end on one io_context.
class HeadNodes {
 public:
  struct Node {
    std::string name;      // "node 1 (10.0.0.3)"
    std::string launcher;  // "ssh", "pdsh" or "sh"
    int pid = -1;
    std::optional<int> code;  // shell exit code, once reaped
    bool finished = false;
    std::unique_ptr<TailBuffer> err_tail = std::make_unique<TailBuffer>(4096);  // stays put as nodes_ grows
  };

  // `run_id`: the job's, for passing SIGUSR1 and SIGUSR2 on to every agent.
  HeadNodes(const HeadPlan& plan, std::string run_id, boost::asio::io_context& io, Console& console, Watchdog& watchdog,
            rendezvous::CoordinatorServer& server, const JobHangReporter& hang);

  // Starts node `i`'s launcher; `stdin_data` is written to its stdin, which then closes.
  Status StartNode(const std::string& name, const std::string& launcher, const SpawnSpec& base,
                   const std::string& stdin_data);
  // Ends the job on every node (the first call only): each agent gets Abort{cause, code}.
  void Stop(int code, const std::string& cause);
  // Watches the nodes until every agent has finished; then calls `done` with the
  // job's exit code (128+N after a signal, 1 when the job never ended).
  void Run(std::function<void(int)> done);

 private:
  void WaitSignals();
  void WaitPassOn();
  void Reaped(int pid, int status);
  void MaybeFinished(size_t i);
  void ArmDeadline();
  void WaitDeadline(std::chrono::steady_clock::duration after);
  void KillAll();
  bool AllFinished() const;
  void Complete();

  const HeadPlan& plan_;
  boost::asio::io_context& io_;
  Console& console_;
  Watchdog& watchdog_;
  rendezvous::CoordinatorServer& server_;
  const JobHangReporter& hang_;
  std::string run_id_;
  boost::asio::signal_set signals_;  // stop signals
  boost::asio::signal_set pass_on_;  // SIGUSR1, SIGUSR2: to every agent's workers
  boost::asio::steady_timer deadline_;
  bool deadline_armed_ = false;
  bool completed_ = false;
  std::function<void(int)> done_;
  Lifetime life_;  // last: expires first
  std::vector<Node> nodes_;
  Streams streams_;  // group i: node i's
  Reaper reaper_;
  bool stopping_ = false;
  int stop_signal_ = 0;
};

}  // namespace dlaunch::launcher
