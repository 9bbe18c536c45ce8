// The rendezvous core alone, with a fake listener in place of the hang detector
// and the query router: what it tells the listener, when, and where the
// listener's actions land among its own. The core's own rules (handshake,
// gathering, restarts) are tested through Coordinator in coordinator*_test.cpp.
#include "rendezvous/rendezvous_core.hpp"

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
      } else if (const auto* send = std::get_if<rendezvous::Send>(&action)) {
        trail.push_back(fmt::format("send {} {}", send->conn, TypeName(send->message)));
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
  REQUIRE(trail.size() == 6);
  CHECK(trail[0] == fmt::format("listener: done {} 1", b));
  CHECK(trail[1] == fmt::format("send {} done", a));
  CHECK(trail[3] == "listener: end");
  CHECK(trail[5] == "ended 0 rendezvous head:29400: job 'job42' finished on 2 nodes (2 workers, generation 1)");
}

TEST_CASE("rendezvous_core: a joined agent gone is passed on before the node is lost", "[rendezvous_core]") {
  CoreJob j(2, 3);
  ConnId a = j.Join("a");
  ConnId b = j.Join("b");
  j.Take(j.core.OnTick(j.now + 30s));
  ConnId c = j.Join("c");  // late: waiting
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
  CHECK(j.Trail() == std::vector<std::string>{"hang report", fmt::format("send {} abort", a), "listener: end", "log",
                                              "ended 124 " + reason});
  CHECK(j.core.state() == RendezvousCore::State::kEnded);
}

}  // namespace dlaunch::rendezvous
