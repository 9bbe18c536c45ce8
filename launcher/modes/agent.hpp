// The rendezvous agent's session: this node's side of a multi-node job, over a
// real connection. It runs rendezvous::AgentMachine (the protocol, its states and
// deadlines) on the event loop: it opens and closes the connection the machine
// asks for, keeps one timer at the machine's next deadline, and carries out the
// rest through its owner's hooks. Everything runs on the event loop's thread
// (launcher/core/event_loop.hpp) and nothing in it blocks.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/process/runner.hpp"
#include "rendezvous/agent_machine.hpp"
#include "rendezvous/connection.hpp"

namespace dlaunch::launcher {

class Agent : public JobChannel {
 public:
  struct Hooks {
    // Start this node's workers for `assignment`; none run when it is called.
    std::function<void(const rendezvous::Assignment& assignment)> run;
    // This node is done: its exit code and, when not empty, the line that says why.
    std::function<void(int code, const std::string& error)> finish;
    // A line for the console ("rendezvous ...: ...").
    std::function<void(const std::string& line)> notice;
    // The coordinator asks about this node's workers (rendezvous::DoQuery): call
    // Answer(id, items) once, now or later. Unset: every query gets no items.
    std::function<void(int id, const std::string& what)> query;
  };

  // `target` is where to connect; options.endpoint names it in messages.
  Agent(boost::asio::io_context& io, rendezvous::HostPort target, rendezvous::AgentMachineOptions options,
        Hooks hooks);
  ~Agent() override;

  void Start();
  // The workers started by `run` have all exited with node result `code`.
  void WorkersDone(int code);
  // The answer to the query hook's `id` (AgentMachine::Answer: cut to fit).
  void Answer(int id, std::vector<std::string> items);

  // JobChannel: the runner of the current workers.
  void Attach(std::function<void(int, const std::string&)> abort) override;
  void LocalFailure(int rank, int code, const std::string& reason) override;

 private:
  void Apply(std::vector<rendezvous::AgentAction> actions);
  void Connect();
  void HangUp();
  void ArmTimer();

  boost::asio::io_context& io_;
  rendezvous::HostPort target_;
  Hooks hooks_;
  rendezvous::AgentMachine machine_;
  boost::asio::ip::tcp::resolver resolver_;
  std::unique_ptr<boost::asio::ip::tcp::socket> connecting_;
  std::shared_ptr<rendezvous::Connection> conn_;
  boost::asio::steady_timer timer_;
  std::function<void(int, const std::string&)> abort_;
  std::uint64_t attempt_ = 0;  // tells a stale connect or connection apart
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace dlaunch::launcher
