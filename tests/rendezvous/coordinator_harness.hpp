// A driver for the coordinator state machine: fake connections, a fake clock, and
// a record of every action, per connection, like ninja's FakeCommandRunner.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "rendezvous/auth.hpp"
#include "rendezvous/coordinator.hpp"

namespace dlaunch::rendezvous::testing {

inline CoordinatorOptions Opts(int min_nodes, int max_nodes) {
  CoordinatorOptions o;
  o.endpoint = "head:29400";
  o.run_id = "job42";
  o.min_nodes = min_nodes;
  o.max_nodes = max_nodes;
  return o;
}

// A Join from `host` with one address derived from it ("a" -> "10.1.a").
inline Join MakeJoin(const std::string& host, int nproc = 1) {
  Join j;
  j.run_id = "job42";
  j.host = host;
  j.addrs = {"10.1." + host};
  j.nproc = nproc;
  return j;
}

class Harness {
 public:
  explicit Harness(CoordinatorOptions options) : token_(options.token), c(std::move(options)) {}

  void Apply(std::vector<Action> actions) {
    for (Action& action : actions) {
      bool wrote = ExpandWrites(action, [&](const Action& one) {
        if (const auto* s = std::get_if<rendezvous::Send>(&one)) {
          CHECK_FALSE(closed.count(s->conn));  // nothing is written to a closed connection
          inbox[s->conn].push_back(s->message);
          return;
        }
        const auto& x = std::get<rendezvous::Close>(one);
        CHECK_FALSE(closed.count(x.conn));  // never closed twice
        closed[x.conn] = x.reason;
      });
      if (wrote) continue;
      if (auto* l = std::get_if<rendezvous::Log>(&action)) {
        logs.push_back(l->line);
        limits.push_back(l->limit);
      } else if (auto* n = std::get_if<rendezvous::NodeLost>(&action)) {
        lost.push_back(fmt::format("{} {} {}", n->node_rank, n->host, n->what));
      } else if (auto* hs = std::get_if<HangSuspected>(&action)) {
        suspected.push_back(*hs);
      } else if (auto* hr = std::get_if<HangReport>(&action)) {
        CHECK_FALSE(ended.has_value());  // a report comes before the end it causes
        reports.push_back(std::move(*hr));
      } else if (auto* qa = std::get_if<QueryAnswered>(&action)) {
        answered.push_back(std::move(*qa));
      } else if (auto* ev = std::get_if<JobEvent>(&action)) {
        events.push_back(std::move(*ev));
      } else {
        CHECK_FALSE(ended.has_value());  // the job ends once
        ended = std::get<JobEnded>(action);
      }
    }
  }

  ConnId Connect() {
    ConnId id = next_++;
    Apply(c.OnConnect(id, "10.0.0." + std::to_string(id) + ":5000", now));
    return id;
  }
  void Send(ConnId conn, const Message& m) { Apply(c.OnMessage(conn, m, now)); }
  void Disconnect(ConnId conn) { Apply(c.OnDisconnect(conn, now)); }
  // `unread`: the connections whose bytes wait unread in the coordinator's process.
  void TickAt(Clock::duration since_t0, const std::set<ConnId>& unread) {
    now = t0 + since_t0;
    Apply(c.OnTick(now, [&](ConnId id) { return unread.count(id) > 0; }));
  }
  void TickAt(Clock::duration since_t0) {
    now = t0 + since_t0;
    Apply(c.OnTick(now));
  }

  // Connects and shakes hands, proving `token` when the coordinator wants a proof.
  ConnId Handshake(const std::string& token) {
    ConnId id = Connect();
    std::string nonce(kNonceSize, static_cast<char>('A' + id));
    Send(id, Hello{kProtocolVersion, "job42", nonce});
    if (closed.count(id)) return id;
    const Challenge& challenge = std::get<Challenge>(inbox[id].back());
    if (!challenge.nonce.empty()) {
      // Mutual authentication: the coordinator proved the token first.
      CHECK(Verify(token_, Prover::kCoordinator, nonce, challenge.nonce, "job42", challenge.proof));
      Send(id, Proof{ProofFor(token, Prover::kAgent, nonce, challenge.nonce, "job42")});
    }
    return id;
  }
  ConnId JoinAs(const Join& join) {
    ConnId id = Handshake(token_);
    if (!closed.count(id)) Send(id, join);
    return id;
  }

  std::vector<Assignment> AssignmentsOf(ConnId conn) {
    std::vector<Assignment> out;
    for (const Message& m : inbox[conn])
      if (auto* a = std::get_if<Assignment>(&m)) out.push_back(*a);
    return out;
  }
  Assignment LastAssignment(ConnId conn) {
    std::vector<Assignment> all = AssignmentsOf(conn);
    REQUIRE_FALSE(all.empty());
    return all.back();
  }
  // The node rank each connection got in its latest Assignment, by host.
  std::map<std::string, int> RanksByHost(const std::vector<ConnId>& conns) {
    std::map<std::string, int> out;
    for (ConnId id : conns) {
      Assignment a = LastAssignment(id);
      out[a.nodes.at(static_cast<std::size_t>(a.node_rank)).host] = a.node_rank;
    }
    return out;
  }
  // Every open connection that was last told to stand by says its workers are
  // gone (a Done for the stopped generation), as its agent does once they exit.
  void Stopped() {
    std::vector<std::pair<ConnId, int>> told;
    for (const auto& [conn, messages] : inbox)
      if (!closed.count(conn) && !messages.empty())
        if (const auto* s = std::get_if<Standby>(&messages.back())) told.emplace_back(conn, s->generation);
    for (const auto& [conn, generation] : told) Send(conn, Done{generation, -1, 143});
  }
  bool HasLog(const std::string& line) const { return std::find(logs.begin(), logs.end(), line) != logs.end(); }

  const Clock::time_point t0{};
  Clock::time_point now = t0;
  std::map<ConnId, std::vector<Message>> inbox;
  std::map<ConnId, std::string> closed;
  std::vector<std::string> logs;
  std::vector<std::string> limits;  // each log line's Log::limit
  std::vector<std::string> lost;    // NodeLost: "NODE HOST WHAT"
  std::optional<JobEnded> ended;
  std::vector<HangSuspected> suspected;
  std::vector<HangReport> reports;
  std::vector<QueryAnswered> answered;  // on-demand queries, in order
  std::vector<JobEvent> events;         // in order
  // The events named `name`, in order.
  std::vector<JobEvent> EventsNamed(const std::string& name) const {
    std::vector<JobEvent> out;
    for (const JobEvent& e : events)
      if (e.name == name) out.push_back(e);
    return out;
  }

 private:
  std::string token_;
  ConnId next_ = 1;

 public:
  Coordinator c;
};

}  // namespace dlaunch::rendezvous::testing
