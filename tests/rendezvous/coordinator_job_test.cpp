// The coordinator over a job's life: gathering with min/max and timeouts, then
// supervision (heartbeats, failures, the exit barrier, restart generations).
#include "rendezvous/coordinator.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "tests/rendezvous/coordinator_harness.hpp"

namespace dlaunch::rendezvous {

using testing::Harness;
using testing::MakeJoin;
using testing::Opts;
using namespace std::chrono_literals;

namespace {

// Runs `h` until each host in `hosts` has joined at t0; returns their connections.
std::vector<ConnId> JoinAll(Harness& h, const std::vector<std::string>& hosts) {
  std::vector<ConnId> out;
  for (const std::string& host : hosts) out.push_back(h.JoinAs(MakeJoin(host)));
  return out;
}

void Beat(Harness& h, const std::vector<ConnId>& conns) {
  for (ConnId id : conns) h.Send(id, Heartbeat{});
}

}  // namespace

TEST_CASE("min reached starts the last call; its end assigns", "[coordinator]") {
  CoordinatorOptions o = Opts(2, 4);
  o.heartbeat_timeout = 1h;
  Harness h(o);
  ConnId a = h.JoinAs(MakeJoin("a"));
  h.now = h.t0 + 1s;
  ConnId b = h.JoinAs(MakeJoin("b"));
  CHECK(h.HasLog("rendezvous head:29400: 2 of 2..4 nodes joined; last call for 30s"));
  CHECK(*h.c.NextDeadline() == h.t0 + 31s);
  h.now = h.t0 + 5s;
  ConnId c = h.JoinAs(MakeJoin("c"));
  h.TickAt(30999ms);
  CHECK(h.AssignmentsOf(a).empty());
  h.TickAt(31s);
  CHECK(h.LastAssignment(a).nodes.size() == 3);
  CHECK(h.LastAssignment(b).node_rank == 1);
  CHECK(h.LastAssignment(c).node_rank == 2);
  CHECK(h.c.generation() == 1);
}

TEST_CASE("max reached assigns at once, without waiting for the last call", "[coordinator]") {
  Harness h(Opts(2, 3));
  std::vector<ConnId> conns = JoinAll(h, {"a", "b"});
  CHECK(h.AssignmentsOf(conns[0]).empty());
  ConnId c = h.JoinAs(MakeJoin("c"));
  CHECK(h.LastAssignment(c).nodes.size() == 3);
  CHECK(h.c.state() == Coordinator::State::kRunning);
}

TEST_CASE("dropping below min cancels the last call", "[coordinator]") {
  CoordinatorOptions o = Opts(2, 4);
  o.heartbeat_timeout = 1h;
  Harness h(o);
  std::vector<ConnId> conns = JoinAll(h, {"a", "b"});
  h.now = h.t0 + 10s;
  h.Send(conns[1], Leave{-1});
  CHECK(h.closed.at(conns[1]) == "left");
  h.TickAt(30s);
  CHECK(h.AssignmentsOf(conns[0]).empty());
  h.now = h.t0 + 40s;
  ConnId c = h.JoinAs(MakeJoin("c"));
  h.TickAt(69s);
  CHECK(h.AssignmentsOf(c).empty());
  h.TickAt(70s);
  CHECK(h.LastAssignment(c).node_rank == 1);
}

TEST_CASE("join timeout: every waiting agent gets one line naming who joined", "[coordinator]") {
  CoordinatorOptions o = Opts(4, 4);
  o.join_timeout = 30s;
  o.heartbeat_timeout = 1h;
  Harness h(o);
  ConnId a = h.JoinAs(MakeJoin("a"));
  h.now = h.t0 + 5s;
  ConnId b = h.JoinAs(MakeJoin("b"));
  ConnId handshaking = h.Connect();
  h.TickAt(29999ms);
  CHECK_FALSE(h.ended.has_value());
  h.TickAt(30s);
  const std::string line = "rendezvous head:29400: timed out after 30s waiting for 2 of 4 nodes (joined: a, b)";
  CHECK(h.inbox[a].back() == Message(Abort{line, 1}));
  CHECK(h.inbox[b].back() == Message(Abort{line, 1}));
  CHECK(h.inbox[handshaking].empty());
  CHECK(h.closed.size() == 3);
  REQUIRE(h.ended.has_value());
  CHECK(h.ended->exit_code == 1);
  CHECK(h.ended->summary == line);
  CHECK(h.c.state() == Coordinator::State::kEnded);
}

TEST_CASE("heartbeats keep an agent; silence loses it and aborts the job", "[coordinator]") {
  Harness h(Opts(3, 3));
  std::vector<ConnId> conns = JoinAll(h, {"a", "b", "c"});
  h.now = h.t0 + 10s;
  Beat(h, {conns[0], conns[1]});
  CHECK(h.inbox[conns[0]].back() == Message(Heartbeat{}));  // answered
  h.TickAt(14999ms);
  CHECK_FALSE(h.ended.has_value());
  h.TickAt(15s);
  const std::string line = "rendezvous head:29400: node 2 (c) lost (no heartbeat for 15s)";
  CHECK(h.closed.at(conns[2]) == "no heartbeat for 15s");
  CHECK(h.inbox[conns[0]].back() == Message(Abort{line, 1}));
  CHECK(h.inbox[conns[1]].back() == Message(Abort{line, 1}));
  REQUIRE(h.ended.has_value());
  CHECK(h.ended->exit_code == 1);
  CHECK(h.ended->summary == line);
}

TEST_CASE("an agent whose beats wait unread is not silent: the coordinator is the one behind", "[coordinator]") {
  Harness h(Opts(3, 3));
  std::vector<ConnId> conns = JoinAll(h, {"a", "b", "c"});
  // The coordinator's process was starved or stopped for 20 s; the agents beat
  // all along, and c's bytes are still in the socket when the tick comes first.
  h.now = h.t0 + 10s;
  Beat(h, {conns[0], conns[1]});
  h.TickAt(20s, {conns[2]});
  CHECK_FALSE(h.ended.has_value());
  CHECK(h.closed.empty());
  // Its beat is read after the tick; a peer that then goes quiet is still lost
  // a full timeout after it was last counted as heard.
  h.now = h.t0 + 21s;
  Beat(h, {conns[0], conns[1], conns[2]});
  h.now = h.t0 + 30s;
  Beat(h, {conns[0], conns[1]});
  h.TickAt(35999ms);
  CHECK_FALSE(h.ended.has_value());
  h.TickAt(36s);
  CHECK(h.closed.at(conns[2]) == "no heartbeat for 15s");
  REQUIRE(h.ended.has_value());
  CHECK(h.ended->summary == "rendezvous head:29400: node 2 (c) lost (no heartbeat for 15s)");
}

TEST_CASE("a worker failure anywhere is broadcast with its root cause and code", "[coordinator]") {
  Harness h(Opts(2, 2));
  std::vector<ConnId> conns = JoinAll(h, {"a", "b"});
  h.Send(conns[1], WorkerFailed{1, 1, 1, 7, "exited with code 7"});
  const std::string line = "rendezvous head:29400: node 1 (b) rank 1 exited with code 7";
  CHECK(h.inbox[conns[0]].back() == Message(Abort{line, 7}));
  CHECK(h.inbox[conns[1]].back() == Message(Abort{line, 7}));
  CHECK(h.closed.size() == 2);
  CHECK(h.ended->exit_code == 7);
  CHECK(h.ended->summary == line);
}

TEST_CASE("a closed connection or a protocol error loses an assigned node", "[coordinator]") {
  SECTION("closed") {
    Harness h(Opts(2, 2));
    std::vector<ConnId> conns = JoinAll(h, {"a", "b"});
    h.Disconnect(conns[0]);
    CHECK(h.inbox[conns[1]].back() == Message(Abort{"rendezvous head:29400: node 0 (a) lost (connection closed)", 1}));
    CHECK_FALSE(h.closed.count(conns[0]));  // it is gone already
    CHECK(h.lost == std::vector<std::string>{"0 a lost (connection closed)"});
  }
  SECTION("bad frame") {
    Harness h(Opts(2, 2));
    std::vector<ConnId> conns = JoinAll(h, {"a", "b"});
    h.Apply(h.c.OnProtocolError(conns[1],
                                Status::InvalidArgument("frame: bad magic 0x47455420 (expected "
                                                        "0x444c5256)"),
                                h.now));
    CHECK(h.closed.at(conns[1]) == "frame: bad magic 0x47455420 (expected 0x444c5256)");
    CHECK(h.inbox[conns[0]].back() ==
          Message(Abort{"rendezvous head:29400: node 1 (b) lost (frame: bad magic 0x47455420 (expected "
                        "0x444c5256))",
                        1}));
  }
}

TEST_CASE("Done from every node passes the exit barrier", "[coordinator]") {
  Harness h(Opts(3, 3));
  std::vector<ConnId> conns = JoinAll(h, {"a", "b", "c"});
  h.Send(conns[0], Done{1, 0, 0});
  h.Send(conns[2], Done{1, 2, 0});
  CHECK_FALSE(h.ended.has_value());
  CHECK(h.inbox[conns[0]].back() == Message(h.LastAssignment(conns[0])));  // nothing yet
  h.Send(conns[1], Done{1, 1, 0});
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(h.inbox[conns[static_cast<std::size_t>(rank)]].back() == Message(Done{1, rank, 0}));
  }
  CHECK(h.closed.size() == 3);
  REQUIRE(h.ended.has_value());
  CHECK(h.ended->exit_code == 0);
  CHECK(h.ended->summary == "rendezvous head:29400: job 'job42' finished on 3 nodes (3 workers, generation 1)");
  // A newcomer after the end is refused.
  ConnId late = h.Connect();
  CHECK(h.closed.at(late) == "job 'job42' has ended");
}

TEST_CASE("a node that finished may leave before the barrier; a failing Done aborts", "[coordinator]") {
  Harness h(Opts(2, 2));
  std::vector<ConnId> conns = JoinAll(h, {"a", "b"});
  h.Send(conns[0], Done{1, 0, 0});
  h.Disconnect(conns[0]);
  CHECK_FALSE(h.ended.has_value());
  h.Send(conns[1], Done{1, 1, 4});
  CHECK(h.inbox[conns[1]].back() == Message(Abort{"rendezvous head:29400: node 1 (b) finished with exit code 4", 4}));
  CHECK(h.ended->exit_code == 4);
}

TEST_CASE("a failure with restarts left starts the next generation everywhere", "[coordinator]") {
  CoordinatorOptions o = Opts(2, 2);
  o.max_restarts = 1;
  Harness h(o);
  std::vector<ConnId> conns = JoinAll(h, {"a", "b"});
  h.Send(conns[1], WorkerFailed{1, 1, 1, 2, "exited with code 2"});
  CHECK(h.HasLog("rendezvous head:29400: node 1 (b) rank 1 exited with code 2; restarting (1 of 1)"));
  // Every node stops its workers first: the next generation waits for each to say so.
  const std::string stop = "rendezvous head:29400: node 1 (b) rank 1 exited with code 2; restarting (1 of 1)";
  CHECK(h.inbox[conns[0]].back() == Message(Standby{1, stop}));
  h.Send(conns[0], Done{1, 0, 143});
  CHECK(h.AssignmentsOf(conns[0]).size() == 1);  // b's workers may still run
  h.Send(conns[1], Done{1, 1, 2});
  for (std::size_t i = 0; i < 2; ++i) {
    Assignment next = h.LastAssignment(conns[i]);
    CHECK(next.generation == 2);
    CHECK(next.restart_count == 1);
    CHECK(next.node_rank == static_cast<int>(i));
  }
  CHECK(h.c.restart_count() == 1);
  // Stragglers of generation 1 are ignored.
  h.Send(conns[0], WorkerFailed{1, 0, 0, 143, "was killed by SIGTERM"});
  h.Send(conns[0], Done{1, 0, 0});
  CHECK_FALSE(h.ended.has_value());
  CHECK(h.HasLog("rendezvous head:29400: ignoring a worker failure of generation 1 from node 0 (a) (now 2)"));
  // No restarts left: the next failure ends the job.
  h.Send(conns[0], WorkerFailed{2, 0, 0, 9, ""});
  CHECK(h.inbox[conns[1]].back() == Message(Abort{"rendezvous head:29400: node 0 (a) rank 0 failed with code 9", 9}));
  CHECK(h.ended->exit_code == 9);
}

TEST_CASE("elastic: a lost node is left out of the next generation", "[coordinator]") {
  CoordinatorOptions o = Opts(2, 3);
  o.max_restarts = 1;
  Harness h(o);
  std::vector<ConnId> conns = JoinAll(h, {"a", "b", "c"});
  CHECK(h.LastAssignment(conns[2]).nodes.size() == 3);
  h.Disconnect(conns[1]);
  h.Stopped();
  Assignment a = h.LastAssignment(conns[0]), c = h.LastAssignment(conns[2]);
  CHECK(a.generation == 2);
  CHECK(a.restart_count == 1);
  REQUIRE(a.nodes.size() == 2);
  CHECK(a.nodes[0].host == "a");
  CHECK(a.nodes[1].host == "c");
  CHECK(c.node_rank == 1);
  h.Send(conns[0], Done{2, 0, 0});
  h.Send(conns[2], Done{2, 1, 0});
  REQUIRE(h.ended.has_value());
  CHECK(h.ended->exit_code == 0);
}

TEST_CASE("a lost node with no restarts left aborts; with restarts, the job stands by", "[coordinator]") {
  SECTION("fixed size, no restarts") {
    Harness h(Opts(2, 2));
    std::vector<ConnId> conns = JoinAll(h, {"a", "b"});
    h.Disconnect(conns[1]);
    CHECK(h.inbox[conns[0]].back() == Message(Abort{"rendezvous head:29400: node 1 (b) lost (connection closed)", 1}));
  }
  SECTION("fixed size, restarts left: it waits the join timeout for a replacement") {
    CoordinatorOptions o = Opts(2, 2);
    o.max_restarts = 3;
    o.join_timeout = 60s;
    o.heartbeat_timeout = 1h;
    Harness h(o);
    std::vector<ConnId> conns = JoinAll(h, {"a", "b"});
    h.Disconnect(conns[1]);
    const std::string reason =
        "rendezvous head:29400: node 1 (b) lost (connection closed); restart 1 of 3 waits up to 60s for a node to "
        "take its place";
    CHECK(h.inbox[conns[0]].back() == Message(Standby{1, reason}));
    CHECK(h.c.state() == Coordinator::State::kGathering);
    CHECK_FALSE(h.ended.has_value());
    h.TickAt(59s);
    CHECK_FALSE(h.ended.has_value());
    h.TickAt(60s);
    REQUIRE(h.ended.has_value());
    CHECK(h.ended->exit_code == 1);
    CHECK(h.inbox[conns[0]].back() ==
          Message(Abort{"rendezvous head:29400: timed out after 60s waiting for 1 of 2 nodes (joined: a)", 1}));
  }
  SECTION("elastic, below min") {
    CoordinatorOptions o = Opts(2, 3);
    o.max_restarts = 3;
    o.heartbeat_timeout = 1h;
    Harness h(o);
    std::vector<ConnId> conns = JoinAll(h, {"a", "b"});
    h.TickAt(30s);
    REQUIRE(h.c.state() == Coordinator::State::kRunning);
    h.Send(conns[0], Leave{0});
    REQUIRE(std::holds_alternative<Standby>(h.inbox[conns[1]].back()));
    ConnId c = h.JoinAs(MakeJoin("c"));  // back to min: the job forms once b's workers are gone
    CHECK(h.AssignmentsOf(c).empty());
    h.Stopped();
    CHECK(h.LastAssignment(c).generation == 2);
    CHECK(h.LastAssignment(conns[1]).node_rank == 1);  // b keeps its node rank; c takes a's
    CHECK(h.LastAssignment(c).node_rank == 0);
  }
}

TEST_CASE("a late joiner waits for the next generation", "[coordinator]") {
  CoordinatorOptions o = Opts(2, 3);
  o.max_restarts = 1;
  o.heartbeat_timeout = 1h;
  Harness h(o);
  std::vector<ConnId> conns = JoinAll(h, {"a", "b"});
  h.TickAt(30s);
  ConnId late = h.JoinAs(MakeJoin("late"));
  CHECK(h.HasLog("rendezvous head:29400: host 'late' joined late; it waits for the next generation"));
  CHECK(h.AssignmentsOf(late).empty());
  h.Send(conns[0], WorkerFailed{1, 0, 0, 1, "exited with code 1"});
  h.Stopped();
  Assignment next = h.LastAssignment(late);
  CHECK(next.generation == 2);
  CHECK(next.node_rank == 2);
  CHECK(next.nodes.size() == 3);
}

TEST_CASE("a late joiner gets Done(-1) when the job finishes without it", "[coordinator]") {
  CoordinatorOptions o = Opts(1, 2);
  o.heartbeat_timeout = 1h;
  Harness h(o);
  ConnId a = h.JoinAs(MakeJoin("a"));
  h.TickAt(30s);
  ConnId late = h.JoinAs(MakeJoin("late"));
  h.Send(a, Done{1, 0, 0});
  CHECK(h.inbox[late].back() == Message(Done{1, -1, 0}));
  CHECK(h.ended->exit_code == 0);
}

TEST_CASE("a fixed-size running job refuses a late joiner", "[coordinator]") {
  Harness h(Opts(2, 2));
  JoinAll(h, {"a", "b"});
  ConnId late = h.JoinAs(MakeJoin("c"));
  CHECK(h.closed.at(late) == "job 'job42' is already running on 2 of 2 nodes");
  CHECK_FALSE(h.ended.has_value());
}

}  // namespace dlaunch::rendezvous

namespace dlaunch::rendezvous {

TEST_CASE("a node table that cannot fit in one frame aborts instead of sending", "[coordinator]") {
  const int n = 2000;  // 255-byte names and addresses: about 526 bytes a node
  Harness h(testing::Opts(n, n));
  std::vector<ConnId> conns;
  for (int i = 0; i < n; ++i) {
    std::string name = fmt::format("{:0>255}", i);
    Join j = testing::MakeJoin(name);
    j.addrs = {name};
    conns.push_back(h.JoinAs(j));
  }
  REQUIRE(h.ended.has_value());
  CHECK(h.ended->summary ==
        "rendezvous head:29400: the node table of 2000 nodes takes 1052300 bytes, over the frame cap of 1048576");
  CHECK(h.inbox[conns[7]].back() == Message(Abort{h.ended->summary, 1}));
  CHECK(h.AssignmentsOf(conns[0]).empty());

  // The same job with no agent asking for the table: each gets its own row.
  Harness c(testing::Opts(n, n));
  ConnId last = 0;
  for (int i = 0; i < n; ++i) {
    std::string name = fmt::format("{:0>255}", i);
    Join j = testing::MakeJoin(name);
    j.addrs = {name};
    j.wants_table = 0;
    last = c.JoinAs(j);
  }
  CHECK_FALSE(c.ended.has_value());
  CHECK(c.LastAssignment(last).nodes.size() == 1);
  CHECK(c.LastAssignment(last).nnodes == n);
}

}  // namespace dlaunch::rendezvous

namespace dlaunch::rendezvous {

TEST_CASE("AbortJob ends the job from outside: waiting and running agents get Abort", "[coordinator]") {
  // Gathering: two of three joined.
  Harness h(Opts(3, 3));
  ConnId a = h.JoinAs(MakeJoin("a"));
  ConnId b = h.JoinAs(MakeJoin("b"));
  h.Apply(h.c.AbortJob(1, "node 2 (c): ssh exited with code 255 before the job ended"));
  const std::string why = "rendezvous head:29400: node 2 (c): ssh exited with code 255 before the job ended";
  for (ConnId id : {a, b}) {
    CHECK(std::get<Abort>(h.inbox[id].back()) == Abort{why, 1});
    CHECK(h.closed.count(id) == 1);
  }
  REQUIRE(h.ended.has_value());
  CHECK(h.ended->exit_code == 1);
  CHECK(h.ended->summary == why);
  CHECK(h.c.state() == Coordinator::State::kEnded);
  // Once ended, another abort does nothing.
  CHECK(h.c.AbortJob(130, "stopped").empty());

  // Running: the code given reaches every agent.
  Harness r(Opts(1, 1));
  ConnId x = r.JoinAs(MakeJoin("x"));
  REQUIRE(r.c.state() == Coordinator::State::kRunning);
  r.Apply(r.c.AbortJob(130, "stopped by SIGINT on the head"));
  CHECK(std::get<Abort>(r.inbox[x].back()).code == 130);
  CHECK(r.ended->exit_code == 130);
}

}  // namespace dlaunch::rendezvous

namespace dlaunch::rendezvous {

TEST_CASE("an agent that wants no table gets its own row, its rank offset and the job's size", "[coordinator]") {
  Harness h(Opts(3, 3));
  Join a = MakeJoin("a", 2), b = MakeJoin("b", 3), c = MakeJoin("c", 1);
  b.wants_table = 0;
  c.wants_table = 0;
  ConnId ca = h.JoinAs(a), cb = h.JoinAs(b), cc = h.JoinAs(c);
  Assignment full = h.LastAssignment(ca), mid = h.LastAssignment(cb), last = h.LastAssignment(cc);
  CHECK(full.nodes.size() == 3);
  CHECK(full.rank_offset == 0);
  for (const Assignment* x : {&full, &mid, &last}) {
    CHECK(x->nnodes == 3);
    CHECK(x->world_size == 6);
    CHECK(x->master_addr == "10.1.a");
  }
  REQUIRE(mid.nodes.size() == 1);
  CHECK(mid.nodes[0].host == "b");
  CHECK(mid.nodes[0].nproc == 3);
  CHECK(mid.node_rank == 1);
  CHECK(mid.rank_offset == 2);
  REQUIRE(last.nodes.size() == 1);
  CHECK(last.nodes[0].host == "c");
  CHECK(last.rank_offset == 5);
}

TEST_CASE("wants_table is 0 or 1", "[coordinator]") {
  Harness h(Opts(1, 1));
  Join j = MakeJoin("a");
  j.wants_table = 2;
  ConnId id = h.JoinAs(j);
  CHECK(h.closed.at(id) == "join from host 'a': wants_table 2 is not 0 or 1");
}

}  // namespace dlaunch::rendezvous
