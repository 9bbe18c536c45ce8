// The rendezvous core alone, with a fake listener in place of the hang detector
// and the query router: what it tells the listener, when, and where the
// listener's actions land among its own. The core's own rules (handshake,
// gathering, restarts) are tested through Coordinator in coordinator*_test.cpp.
#include "rendezvous/rendezvous_core.hpp"

#include <map>

#include <catch2/catch.hpp>
#include <fmt/format.h>

namespace dlaunch::rendezvous {

using namespace std::chrono_literals;

namespace {

// Records every call as one line, and answers each with a Log naming it (so the
// tests can see where its actions land) unless told otherwise.
class RecordingListener final : public CoreListener {
 public:
  std::vector<Action> OnGeneration(const std::vector<ConnId>& conns, const std::vector<envmap::Node>& table,
                                   Clock::time_point) override {
    std::string line = "generation";
    for (std::size_t r = 0; r < conns.size(); ++r) line += fmt::format(" {}={}", table[r].host, conns[r]);
    return Record(line);
  }
  std::vector<Action> OnHeartbeat(int node_rank, const Heartbeat& beat, Clock::time_point) override {
    return Record(fmt::format("heartbeat {} {}", node_rank, beat.silent_ms));
  }
  std::vector<Action> OnReport(ConnId conn, const std::string& name, const Report& report) override {
    return Record(fmt::format("report {} {} {}", conn, name, report.id));
  }
  std::vector<Action> OnNodeDone(ConnId conn, int node_rank, Clock::time_point) override {
    return Record(fmt::format("done {} {}", conn, node_rank));
  }
  std::vector<Action> OnNodeGone(ConnId conn, int node_rank, const std::string& what, Clock::time_point) override {
    return Record(fmt::format("gone {} {} {}", conn, node_rank, what));
  }
  std::vector<Action> OnTick(Clock::time_point) override {
    if (stop_on_tick) return {HangReport{90s, {}, true}};
    return Record("tick");
  }
  std::vector<Action> OnStandby() override { return Record("standby"); }
  std::vector<Action> OnJobEnd() override { return Record("end"); }

  std::vector<Action> Record(const std::string& line) {
    calls.push_back(line);
    return {Log{"listener: " + line, ""}};
  }

  std::vector<std::string> calls;
  bool stop_on_tick = false;
};

Join CoreJoin(const std::string& host) {
  Join j;
  j.run_id = "job42";
  j.host = host;
  j.addrs = {"10.3." + host};
  j.nproc = 1;
  return j;
}

// A core of min..max nodes with the listener above, and its actions in order.
struct CoreJob {
  CoreJob(int min_nodes, int max_nodes) : core(Options(min_nodes, max_nodes), listener) {}
  static CoordinatorOptions Options(int min_nodes, int max_nodes) {
    CoordinatorOptions o;
    o.endpoint = "head:29400";
    o.run_id = "job42";
    o.min_nodes = min_nodes;
    o.max_nodes = max_nodes;
    o.heartbeat_timeout = std::chrono::hours(1);
    return o;
  }
  void Take(std::vector<Action> actions) {
    for (Action& action : actions) {
      if (const auto* log = std::get_if<Log>(&action)) {
        trail.push_back(log->line.rfind("listener: ", 0) == 0 ? log->line : "log");
      } else if (ExpandWrites(action, [&](const Action& one) {
                   if (const auto* send = std::get_if<rendezvous::Send>(&one))
                     trail.push_back(fmt::format("send {} {}", send->conn, TypeName(send->message)));
                 })) {
        // (closes are not in the trail)
      } else if (const auto* ended = std::get_if<JobEnded>(&action)) {
        trail.push_back(fmt::format("ended {} {}", ended->exit_code, ended->summary));
      } else if (std::holds_alternative<HangReport>(action)) {
        trail.push_back("hang report");
      } else if (std::holds_alternative<NodeLost>(action)) {
        trail.push_back("node lost");
      }
    }
  }
  ConnId Join(const std::string& host) {
    ConnId conn = next++;
    Take(core.OnAuthenticated(conn, "10.0.0.9:5000", now));
    Take(core.OnMessage(conn, CoreJoin(host), now));
    return conn;
  }
  void Send(ConnId conn, const Message& message) { Take(core.OnMessage(conn, message, now)); }
  // The trail since the last call of Trail().
  std::vector<std::string> Trail() { return std::exchange(trail, {}); }

  RecordingListener listener;
  RendezvousCore core;
  Clock::time_point now{};
  ConnId next = 1;
  std::vector<std::string> trail;
};

}  // namespace

TEST_CASE("rendezvous_core: a generation is announced before its assignments", "[rendezvous_core]") {
  CoreJob j(2, 2);
  ConnId a = j.Join("a");
  ConnId b = j.Join("b");
  CHECK(j.listener.calls == std::vector<std::string>{fmt::format("generation a={} b={}", a, b)});
  CHECK(j.Trail() == std::vector<std::string>{fmt::format("listener: generation a={} b={}", a, b), "log",
                                              fmt::format("send {} assignment", a),
                                              fmt::format("send {} assignment", b)});
  CHECK(j.core.state() == RendezvousCore::State::kRunning);
}

TEST_CASE("rendezvous_core: a generation's assignments leave as one action, built one at a time", "[rendezvous_core]") {
  // Three agents; "c" asks for the whole node table, the others for their own row.
  CoordinatorOptions o = CoreJob::Options(3, 3);
  RecordingListener listener;
  RendezvousCore core(o, listener);
  std::vector<Action> out;
  for (ConnId conn = 1; conn <= 3; ++conn) {
    Join join = CoreJoin(std::string(1, static_cast<char>('a' + conn - 1)));
    join.nproc = static_cast<int>(conn);  // 1, 2, 3 workers
    join.wants_table = conn == 3 ? 1 : 0;
    for (Action& action : core.OnAuthenticated(conn, "10.0.0.9:5000", {})) out.push_back(std::move(action));
    for (Action& action : core.OnMessage(conn, join, {})) out.push_back(std::move(action));
  }
  int whole = 0;
  for (const Action& action : out) {
    CHECK_FALSE(std::holds_alternative<rendezvous::Send>(action));  // nothing else was sent to them
    if (const auto* many = std::get_if<SendAssignments>(&action)) {
      ++whole;
      REQUIRE(many->to.size() == 3);
      CHECK(&many->generation->table == &core.nodes());  // the core's plan, shared, not copied
    }
  }
  CHECK(whole == 1);
  std::map<ConnId, Assignment> got;
  for (const Action& action : out)
    ExpandWrites(action, [&](const Action& one) {
      const auto& send = std::get<rendezvous::Send>(one);
      got[send.conn] = std::get<Assignment>(send.message);
    });
  REQUIRE(got.size() == 3);
  int offset = 0;
  for (int r = 0; r < 3; ++r) {
    // Node ranks follow arrival here: a is 0 (1 worker), b 1 (2), c 2 (3).
    const Assignment& a = got[static_cast<ConnId>(r + 1)];
    CHECK(a.node_rank == r);
    CHECK(a.rank_offset == offset);
    CHECK(a.world_size == 6);
    CHECK(a.nodes.size() == (r == 2 ? 3u : 1u));
    CHECK(a.nodes.at(r == 2 ? 2 : 0).nproc == r + 1);
    offset += r + 1;
  }
  CHECK(core.nodes().size() == 3);
}

TEST_CASE("rendezvous_core: the job's end leaves as one Farewell: the last word to each joined agent, then its close",
          "[rendezvous_core]") {
  CoreJob j(2, 2);
  ConnId shy = j.next++;
  j.Take(j.core.OnAuthenticated(shy, "10.0.0.9:5001", j.now));  // connected, never joins
  ConnId a = j.Join("a");
  ConnId b = j.Join("b");
  j.Send(a, Done{1, 0, 0});
  std::vector<Action> out = j.core.OnMessage(b, Done{1, 1, 0}, j.now);
  int farewells = 0;
  std::vector<std::string> writes;
  for (const Action& action : out) {
    CHECK_FALSE(std::holds_alternative<rendezvous::Send>(action));
    CHECK_FALSE(std::holds_alternative<Close>(action));
    farewells += std::holds_alternative<Farewell>(action);
    ExpandWrites(action, [&](const Action& one) {
      if (const auto* send = std::get_if<rendezvous::Send>(&one)) {
        const auto& done = std::get<Done>(send->message);
        writes.push_back(fmt::format("done {} {} {}", send->conn, done.generation, done.node_rank));
      } else {
        writes.push_back(fmt::format("close {} {}", std::get<Close>(one).conn, std::get<Close>(one).reason));
      }
    });
  }
  CHECK(farewells == 1);
  CHECK(writes == std::vector<std::string>{fmt::format("close {} job ended", shy), fmt::format("done {} 1 0", a),
                                           fmt::format("close {} job ended", a), fmt::format("done {} 1 1", b),
                                           fmt::format("close {} job ended", b)});
  CHECK(j.core.state() == RendezvousCore::State::kEnded);
  // A plain Send or Close stands for itself; a Log for nothing.
  int calls = 0;
  CHECK(ExpandWrites(Action(rendezvous::Send{7, Heartbeat{}}), [&](const Action&) { calls += 7; }));
  CHECK(ExpandWrites(Action(Close{8, "x"}), [&](const Action&) { calls += 8; }));
  CHECK_FALSE(ExpandWrites(Action(Log{"x", ""}), [&](const Action&) { ++calls; }));
  CHECK(calls == 15);
}

TEST_CASE("rendezvous_core: heartbeats of assigned nodes go on, each answered", "[rendezvous_core]") {
  CoreJob j(1, 2);
  ConnId a = j.Join("a");
  j.Take(j.core.OnTick(j.now + 30s));  // the last call ends: a alone
  j.now += 30s;
  ConnId late = j.Join("late");  // waits for the next generation
  j.Trail();
  j.Send(a, Heartbeat{1234});
  j.Send(late, Heartbeat{99});
  CHECK(j.listener.calls.back() == "heartbeat 0 1234");
  CHECK(j.Trail() == std::vector<std::string>{"listener: heartbeat 0 1234", fmt::format("send {} heartbeat", a),
                                              fmt::format("send {} heartbeat", late)});
}

TEST_CASE("rendezvous_core: reports of joined agents go on, named; others are refused", "[rendezvous_core]") {
  CoreJob j(2, 2);
  ConnId a = j.Join("a");
  j.Send(a, Report{5, 0, {}});  // waiting: "host 'a'"
  CHECK(j.listener.calls.back() == fmt::format("report {} host 'a' 5", a));
  ConnId b = j.Join("b");
  j.Send(b, Report{6, 1, {}});
  CHECK(j.listener.calls.back() == fmt::format("report {} node 1 (b) 6", b));
  // Before the join a Report is out of order: refused, and the listener hears nothing.
  std::size_t calls = j.listener.calls.size();
  j.Take(j.core.OnAuthenticated(9, "10.0.0.9:5000", j.now));
  j.Trail();
  j.Send(9, Report{7, 0, {}});
  CHECK(j.listener.calls.size() == calls);
  CHECK(j.Trail() == std::vector<std::string>{"send 9 refused", "log"});
}

TEST_CASE("rendezvous_core: Done is passed on; the last one ends the job after the listener", "[rendezvous_core]") {
  CoreJob j(2, 2);
  ConnId a = j.Join("a");
  ConnId b = j.Join("b");
  j.Trail();
  j.Send(a, Done{1, 0, 0});
  CHECK(j.Trail() == std::vector<std::string>{fmt::format("listener: done {} 0", a)});
  j.Send(b, Done{1, 1, 0});
  std::vector<std::string> trail = j.Trail();
  // No log line of its own: the server logs the summary (or its host says it).
  REQUIRE(trail.size() == 5);
  CHECK(trail[0] == fmt::format("listener: done {} 1", b));
  CHECK(trail[1] == fmt::format("send {} done", a));
  CHECK(trail[3] == "listener: end");
  CHECK(trail[4] == "ended 0 rendezvous head:29400: job 'job42' finished on 2 nodes (2 workers, generation 1)");
}

TEST_CASE("rendezvous_core: a joined agent gone is passed on before the node is lost", "[rendezvous_core]") {
  CoreJob j(2, 3);
  ConnId a = j.Join("a");
  ConnId b = j.Join("b");
  j.Take(j.core.OnTick(j.now + 30s));
  ConnId c = j.Join("c");                                      // late: waiting
  j.Take(j.core.OnAuthenticated(20, "10.0.0.9:5000", j.now));  // never joins
  j.Trail();
  j.Take(j.core.OnDisconnect(20, j.now));
  CHECK(j.Trail().empty());  // not joined: nothing to tell
  j.Take(j.core.OnDisconnect(c, j.now));
  CHECK(j.listener.calls.back() == fmt::format("gone {} -1 lost (connection closed)", c));
  j.Trail();
  j.Take(j.core.OnDisconnect(b, j.now));
  std::vector<std::string> trail = j.Trail();
  REQUIRE(trail.size() >= 3);
  CHECK(trail[0] == fmt::format("listener: gone {} 1 lost (connection closed)", b));
  CHECK(trail[1] == "node lost");
  CHECK(trail.back() == "ended 1 rendezvous head:29400: node 1 (b) lost (connection closed)");
  (void)a;
}

TEST_CASE("rendezvous_core: time goes on to the listener only while running", "[rendezvous_core]") {
  CoreJob j(2, 2);
  j.Join("a");
  j.Take(j.core.OnTick(j.now + 1s));
  CHECK(j.listener.calls.empty());
  j.Join("b");
  j.Take(j.core.OnTick(j.now + 2s));
  CHECK(j.listener.calls.back() == "tick");
}

TEST_CASE("rendezvous_core: a stopping hang report ends the job right after it", "[rendezvous_core]") {
  CoreJob j(1, 1);
  ConnId a = j.Join("a");
  j.Trail();
  j.listener.stop_on_tick = true;
  j.Take(j.core.OnTick(j.now + 1s));
  std::string reason = "rendezvous head:29400: no rank on any node made progress for 90s (--hang-action stop)";
  CHECK(j.Trail() == std::vector<std::string>{"hang report", fmt::format("send {} abort", a), "listener: end",
                                              "ended 124 " + reason});
  CHECK(j.core.state() == RendezvousCore::State::kEnded);
}

}  // namespace dlaunch::rendezvous
