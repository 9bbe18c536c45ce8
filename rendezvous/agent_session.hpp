// The rendezvous agent's session: this node's side of a multi-node job, over a
// real connection. It runs AgentMachine (the protocol, its states and
// deadlines) on the event loop: it opens and closes the connection the machine
// asks for, keeps one timer at the machine's next deadline, and carries out the
// rest through its owner's hooks. Everything runs on the event loop's thread
// (launcher/core/event_loop.hpp) and nothing in it blocks.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "rendezvous/agent_machine.hpp"
#include "rendezvous/awake_clock.hpp"
#include "rendezvous/connection.hpp"

namespace dlaunch::rendezvous {

class AgentSession {
 public:
  struct Hooks {
    // Start this node's workers for `assignment`; none run when it is called.
    std::function<void(const Assignment& assignment)> run;
    // This node is done: its exit code and, when not empty, the line that says why.
    std::function<void(int code, const std::string& error)> finish;
    // A line for the console ("rendezvous ...: ...").
    std::function<void(const std::string& line)> notice;
    // The coordinator asks about this node's workers (DoQuery): call
    // Answer(id, items) once, now or later. Unset: every query gets no items.
    std::function<void(int id, const std::string& what)> query;
  };

  // `target` is where to connect; options.endpoint names it in messages.
  AgentSession(boost::asio::io_context& io, HostPort target, AgentMachineOptions options, Hooks hooks);
  ~AgentSession();

  void Start();
  // The workers started by `run` have all exited with node result `code`.
  void WorkersDone(int code);
  // The answer to the query hook's `id` (AgentMachine::Answer: cut to fit).
  void Answer(int id, std::vector<std::string> items);

  // The current workers' side (the runner's JobChannel, adapted in
  // launcher/modes/multinode.cpp): `abort(code, reason)` stops them because of a
  // failure elsewhere, until WorkersDone; LocalFailure reports this node's first.
  void Attach(std::function<void(int, const std::string&)> abort);
  void LocalFailure(int rank, int code, const std::string& reason);

  // This node leaves the job (AgentMachine::Leave): the coordinator hears
  // Leave, then the connection closes once it is written. No hook runs after.
  void Leave();
  AgentMachine::State state() const { return machine_.state(); }

 private:
  void Apply(std::vector<AgentAction> actions);
  // Carries out `actions` in order; true when one finished the session.
  bool ApplyOnce(std::vector<AgentAction>& actions);
  void Connect();
  void HangUp();
  void ArmTimer();
  // `options` with a silence that restarts when this process resumes from a pause.
  AgentMachineOptions CountingPauses(AgentMachineOptions options);

  boost::asio::io_context& io_;
  HostPort target_;
  Hooks hooks_;
  // Every time given to the machine: a node frozen with its coordinator does not
  // call it silent on waking (awake_clock.hpp).
  AwakeClock clock_;
  AgentMachine machine_;
  boost::asio::ip::tcp::resolver resolver_;
  std::unique_ptr<boost::asio::ip::tcp::socket> connecting_;
  std::shared_ptr<Connection> conn_;
  boost::asio::steady_timer timer_;
  std::function<void(int, const std::string&)> abort_;
  std::uint64_t attempt_ = 0;              // tells a stale connect or connection apart
  std::optional<std::string> failed_now_;  // why the connect Apply just started failed at once
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace dlaunch::rendezvous
