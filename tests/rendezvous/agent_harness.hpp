// A driver for the agent state machine: a fake clock and a record of every
// action it returned, for agent_machine_test.cpp and agent_machine_hang_test.cpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "rendezvous/agent_machine.hpp"
#include "rendezvous/auth.hpp"

namespace dlaunch::rendezvous::agent_testing {

using namespace std::chrono_literals;
using Clock = AgentMachine::Clock;

inline const std::string kNonceA(kNonceSize, 'A');
inline const std::string kNonceC(kNonceSize, 'C');

// The wall clock at the harness's t0: 30ms into a tick of the retry grids the
// tests use of 100ms and 256ms, 5ms into one of 25ms (all divide 1,000,000s).
inline constexpr std::chrono::nanoseconds kWallAtT0 = 1'000'000s + 30ms;

inline AgentMachineOptions Options(const std::string& token = "") {
  AgentMachineOptions o;
  o.endpoint = "head:29400";
  o.token = token;
  o.join.run_id = "job42";
  o.join.host = "a";
  o.join.nproc = 2;
  o.min_nodes = o.max_nodes = 2;
  o.join_timeout = 5s;
  o.handshake_timeout = 10s;
  o.heartbeat_interval = 5s;
  o.heartbeat_timeout = 15s;
  o.random = [] { return 0.0; };  // every try on its tick, unless a test says otherwise
  o.wall = [](Clock::time_point now) { return now.time_since_epoch() + kWallAtT0; };  // t0 is the epoch
  o.nonce_source = [] { return Result<std::string>(kNonceA); };
  return o;
}

// Drives one machine with a fake clock and keeps every action it returned.
class AgentHarness {
 public:
  explicit AgentHarness(AgentMachineOptions o) : m(std::move(o)) {}

  std::vector<AgentAction> Take(std::vector<AgentAction> actions) {
    all.insert(all.end(), actions.begin(), actions.end());
    return actions;
  }
  std::vector<AgentAction> Start() { return Take(m.Start(now)); }
  std::vector<AgentAction> Connected() { return Take(m.OnConnected("10.0.0.2", now)); }
  std::vector<AgentAction> Receive(const Message& message) { return Take(m.OnMessage(message, now)); }
  std::vector<AgentAction> TickAt(Clock::duration since_t0, bool unread_input = false) {
    now = t0 + since_t0;
    return Take(m.OnTick(now, unread_input));
  }
  // Connects and answers the Hello with a Challenge built by `challenge`.
  std::vector<AgentAction> Handshake(const Challenge& challenge) {
    Start();
    Connected();
    return Receive(challenge);
  }
  std::vector<AgentAction> Joined(const Assignment& a) {
    Handshake(Challenge{});
    return Receive(a);
  }

  size_t Heartbeats() const {
    size_t n = 0;
    for (const AgentAction& a : all)
      if (auto* s = std::get_if<DoSend>(&a); s && std::holds_alternative<Heartbeat>(s->message)) ++n;
    return n;
  }

  const Clock::time_point t0{};
  Clock::time_point now = t0;
  std::vector<AgentAction> all;
  AgentMachine m;
};

// Copies, since the actions are often a temporary.
template <typename T>
std::optional<T> Find(const std::vector<AgentAction>& actions) {
  for (const AgentAction& a : actions)
    if (auto* t = std::get_if<T>(&a)) return *t;
  return std::nullopt;
}

template <typename M>
std::optional<M> Sent(const std::vector<AgentAction>& actions) {
  for (const AgentAction& a : actions)
    if (auto* s = std::get_if<DoSend>(&a))
      if (auto* m = std::get_if<M>(&s->message)) return *m;
  return std::nullopt;
}

inline Assignment Gen(int generation, int node_rank = 1) {
  Assignment a;
  a.generation = generation;
  a.node_rank = node_rank;
  a.nnodes = 2;
  a.run_id = "job42";
  return a;
}

}  // namespace dlaunch::rendezvous::agent_testing
