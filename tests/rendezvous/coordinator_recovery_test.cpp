// The coordinator surviving bad nodes, with a fake clock: restarts counted once
// per job, restarts without progress stopped, the backoff between restarts,
// spares that take a lost node's place while the survivors keep their ranks, a
// lost node that returns, and a job that shrinks and says how ranks moved.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "rendezvous/coordinator.hpp"
#include "tests/rendezvous/coordinator_harness.hpp"

namespace dlaunch::rendezvous {

using testing::Harness;
using testing::MakeJoin;
using testing::Opts;
using namespace std::chrono_literals;

namespace {

CoordinatorOptions QuietOpts(int min_nodes, int max_nodes) {
  CoordinatorOptions o = Opts(min_nodes, max_nodes);
  o.heartbeat_timeout = 1h;
  return o;
}

std::vector<ConnId> JoinHosts(Harness& h, const std::vector<std::string>& hosts, int nproc = 1) {
  std::vector<ConnId> out;
  for (const std::string& host : hosts) out.push_back(h.JoinAs(MakeJoin(host, nproc)));
  return out;
}

// host -> the first global rank of its node in its latest Assignment.
std::map<std::string, int> FirstRanks(Harness& h, const std::vector<ConnId>& conns) {
  std::map<std::string, int> out;
  for (ConnId id : conns) {
    Assignment a = h.LastAssignment(id);
    out[a.nodes.at(static_cast<std::size_t>(a.node_rank)).host] = a.rank_offset;
  }
  return out;
}

bool StoodBy(Harness& h, ConnId conn) {
  return !h.inbox[conn].empty() && std::holds_alternative<Standby>(h.inbox[conn].back());
}

}  // namespace

TEST_CASE("recovery: one failure on any node spends one restart of the job", "[coordinator][recovery]") {
  CoordinatorOptions o = QuietOpts(2, 2);
  o.max_restarts = 2;
  Harness h(o);
  std::vector<ConnId> conns = JoinHosts(h, {"a", "b"});
  // Both nodes report a failure of generation 1: the second is stale once the
  // first restarted the job.
  h.Send(conns[0], WorkerFailed{1, 0, 0, 1, "exited with code 1"});
  h.Stopped();
  h.Send(conns[1], WorkerFailed{1, 1, 1, 1, "exited with code 1"});
  h.Stopped();
  CHECK(h.c.restart_count() == 1);
  CHECK(h.LastAssignment(conns[0]).restart_count == 1);  // TORCHELASTIC_RESTART_COUNT, the same everywhere
  CHECK(h.LastAssignment(conns[1]).restart_count == 1);
  h.Send(conns[1], WorkerFailed{2, 1, 1, 1, "exited with code 1"});
  h.Stopped();
  CHECK(h.LastAssignment(conns[0]).restart_count == 2);
  h.Send(conns[0], WorkerFailed{3, 0, 0, 7, "exited with code 7"});
  h.Stopped();
  REQUIRE(h.ended.has_value());
  CHECK(h.ended->exit_code == 7);  // restarts ran out: the worker's code
}

TEST_CASE("recovery: restarts without progress stop with the do-not-requeue code", "[coordinator][recovery]") {
  CoordinatorOptions o = QuietOpts(2, 2);
  o.max_restarts = 10;
  o.max_no_progress_restarts = 2;
  Harness h(o);
  std::vector<ConnId> conns = JoinHosts(h, {"a", "b"});
  int runs = 1;
  for (int generation = 1; !h.ended && generation < 20; ++generation) {
    h.now += 5s;
    h.Send(conns[1], WorkerFailed{generation, 1, 1, 1, "exited with code 1"});
    h.Stopped();
    if (!h.ended) ++runs;
  }
  REQUIRE(h.ended.has_value());
  CHECK(runs == 3);  // the first run and 2 restarts
  CHECK(h.ended->exit_code == base::kExitNoProgress);
  const std::string why =
      "rendezvous head:29400: node 1 (b) rank 1 exited with code 1; 2 restarts in a row made no progress (no rank "
      "passed its progress at the failure before): not restarting (exit 123: do not requeue)";
  CHECK(h.ended->summary == why);
  CHECK(h.inbox[conns[0]].back() == Message(Abort{why, base::kExitNoProgress}));
}

TEST_CASE("recovery: progress in heartbeats keeps the job restarting", "[coordinator][recovery]") {
  CoordinatorOptions o = QuietOpts(2, 2);
  o.max_restarts = 4;
  o.max_no_progress_restarts = 1;
  Harness h(o);
  std::vector<ConnId> conns = JoinHosts(h, {"a", "b"}, 2);
  for (int generation = 1; generation <= 5; ++generation) {
    // Node 1's local rank 1 (global rank 3) gets further each run; the others stay.
    h.Send(conns[0], Heartbeat{0, {5, -1}});
    h.Send(conns[1], Heartbeat{0, {5, 10 * generation}});
    h.Send(conns[0], WorkerFailed{generation, 0, 0, 3, "exited with code 3"});
    h.Stopped();
  }
  REQUIRE(h.ended.has_value());
  CHECK(h.c.restart_count() == 4);
  CHECK(h.ended->exit_code == 3);  // restarts ran out while making progress: the worker's code
}

TEST_CASE("recovery: progress reported for ranks a node does not have is ignored", "[coordinator][recovery]") {
  CoordinatorOptions o = QuietOpts(2, 2);
  o.max_restarts = 4;
  o.max_no_progress_restarts = 1;
  Harness h(o);
  std::vector<ConnId> conns = JoinHosts(h, {"a", "b"});
  h.Send(conns[0], WorkerFailed{1, 0, 0, 1, "exited with code 1"});
  h.Stopped();
  // Node 0 has one rank: its second value would be node 1's rank, and must not count.
  h.Send(conns[0], Heartbeat{0, {-1, 1'000'000}});
  h.Send(conns[0], WorkerFailed{2, 0, 0, 1, "exited with code 1"});
  h.Stopped();
  REQUIRE(h.ended.has_value());
  CHECK(h.ended->exit_code == base::kExitNoProgress);
}

TEST_CASE("recovery: a worker failure backs off before the next generation", "[coordinator][recovery]") {
  CoordinatorOptions o = QuietOpts(2, 2);
  o.max_restarts = 5;
  o.backoff_min = 10s;
  o.backoff_max = 15s;
  Harness h(o);
  std::vector<ConnId> conns = JoinHosts(h, {"a", "b"});
  h.now = h.t0 + 1s;
  h.Send(conns[0], WorkerFailed{1, 0, 0, 1, "exited with code 1"});
  h.Stopped();
  const std::string reason =
      "rendezvous head:29400: node 0 (a) rank 0 exited with code 1; restarting (1 of 5) in 10s (--restart-backoff)";
  CHECK(h.inbox[conns[0]].back() == Message(Standby{1, reason}));
  CHECK(h.inbox[conns[1]].back() == Message(Standby{1, reason}));
  CHECK(*h.c.NextDeadline() == h.t0 + 11s);
  // A stale failure and Done from the stopping generation are ignored, not refused.
  h.Send(conns[1], WorkerFailed{1, 1, 1, 1, "exited with code 1"});
  h.Stopped();
  h.Send(conns[1], Done{1, 1, 0});
  CHECK(h.closed.empty());
  h.TickAt(10999ms);
  CHECK(h.AssignmentsOf(conns[0]).size() == 1);
  h.TickAt(11s);
  CHECK(h.LastAssignment(conns[0]).generation == 2);
  CHECK(h.RanksByHost(conns) == std::map<std::string, int>{{"a", 0}, {"b", 1}});
  // The next one doubles, up to the cap.
  h.now = h.t0 + 12s;
  h.Send(conns[1], WorkerFailed{2, 1, 1, 1, "exited with code 1"});
  h.Stopped();
  h.TickAt(26999ms);
  CHECK(h.AssignmentsOf(conns[0]).size() == 2);
  h.TickAt(27s);
  CHECK(h.LastAssignment(conns[0]).generation == 3);
}

TEST_CASE("recovery: a lost node does not wait out the backoff", "[coordinator][recovery]") {
  CoordinatorOptions o = QuietOpts(2, 2);
  o.max_restarts = 5;
  o.backoff_min = 10s;
  o.backoff_max = 10s;
  o.spares = 1;
  Harness h(o);
  std::vector<ConnId> conns = JoinHosts(h, {"a", "b"});
  ConnId spare = h.JoinAs(MakeJoin("s"));
  h.Disconnect(conns[1]);
  h.Stopped();
  CHECK(h.LastAssignment(spare).generation == 2);  // at once
}

TEST_CASE("recovery: without --spares a surplus agent is refused; with it, it waits", "[coordinator][recovery]") {
  SECTION("no spares") {
    Harness h(QuietOpts(2, 2));
    JoinHosts(h, {"a", "b"});
    ConnId late = h.JoinAs(MakeJoin("c"));
    CHECK(h.closed.at(late) == "job 'job42' is already running on 2 of 2 nodes");
  }
  SECTION("one spare, then full") {
    CoordinatorOptions o = QuietOpts(2, 2);
    o.spares = 1;
    Harness h(o);
    JoinHosts(h, {"a", "b"});
    ConnId s = h.JoinAs(MakeJoin("s"));
    CHECK_FALSE(h.closed.count(s));
    CHECK(h.AssignmentsOf(s).empty());
    CHECK(h.HasLog("rendezvous head:29400: host 's' waits as a spare (1 of 1)"));
    REQUIRE(h.EventsNamed("spare_waiting").size() == 1);
    CHECK(h.EventsNamed("spare_waiting")[0].fields.at("spares").as_int64() == 1);
    ConnId t = h.JoinAs(MakeJoin("t"));
    CHECK(h.closed.at(t) == "job 'job42' already has its 2 nodes and 1 spare");
    // A spare that leaves frees its place, and says so.
    h.Send(s, Leave{-1});
    REQUIRE(h.EventsNamed("spare_left").size() == 1);
    CHECK(h.EventsNamed("spare_left")[0].fields.at("spares").as_int64() == 0);
    ConnId u = h.JoinAs(MakeJoin("u"));
    CHECK_FALSE(h.closed.count(u));
  }
}

TEST_CASE("recovery: a spare takes the lost node's ranks; survivors keep theirs", "[coordinator][recovery]") {
  CoordinatorOptions o = QuietOpts(4, 4);
  o.max_restarts = 3;
  o.spares = 1;
  Harness h(o);
  std::vector<ConnId> conns = JoinHosts(h, {"a", "b", "c", "d"}, 2);
  ConnId spare = h.JoinAs(MakeJoin("s", 2));
  std::map<std::string, int> before = FirstRanks(h, conns);
  CHECK(before == std::map<std::string, int>{{"a", 0}, {"b", 2}, {"c", 4}, {"d", 6}});
  h.Disconnect(conns[1]);  // b: ranks 2-3
  h.Stopped();
  std::vector<ConnId> now_conns = {conns[0], conns[2], conns[3], spare};
  for (ConnId id : now_conns) CHECK(h.LastAssignment(id).generation == 2);
  CHECK(FirstRanks(h, now_conns) == std::map<std::string, int>{{"a", 0}, {"s", 2}, {"c", 4}, {"d", 6}});
  CHECK(h.LastAssignment(spare).restart_count == 1);
  REQUIRE(h.EventsNamed("spare_promoted").size() == 1);
  CHECK(h.EventsNamed("spare_promoted")[0].fields.at("node").as_int64() == 1);
  CHECK(h.EventsNamed("spare_promoted")[0].fields.at("first_rank").as_int64() == 2);
  CHECK(h.EventsNamed("ranks_renumbered").empty());
  CHECK(h.HasLog("rendezvous head:29400: generation 2: host 's' takes node rank 1 (ranks 2-3)"));
}

TEST_CASE("recovery: without a spare a fixed-size job waits for the lost node to return", "[coordinator][recovery]") {
  CoordinatorOptions o = QuietOpts(3, 3);
  o.max_restarts = 3;
  Harness h(o);
  std::vector<ConnId> conns = JoinHosts(h, {"a", "b", "c"});
  h.now = h.t0 + 5s;
  h.Disconnect(conns[0]);  // node 0 goes
  h.Stopped();
  CHECK(StoodBy(h, conns[1]));
  CHECK(StoodBy(h, conns[2]));
  CHECK(h.EventsNamed("standby").size() == 1);
  h.now = h.t0 + 65s;
  ConnId back = h.JoinAs(MakeJoin("a"));  // it comes back a minute later
  CHECK(h.LastAssignment(back).generation == 2);
  CHECK(h.RanksByHost({back, conns[1], conns[2]}) == std::map<std::string, int>{{"a", 0}, {"b", 1}, {"c", 2}});
  CHECK(h.LastAssignment(back).restart_count == 1);
}

TEST_CASE("recovery: the lost node returns while its spare runs: it waits as a spare", "[coordinator][recovery]") {
  CoordinatorOptions o = QuietOpts(2, 2);
  o.max_restarts = 3;
  o.spares = 1;
  Harness h(o);
  std::vector<ConnId> conns = JoinHosts(h, {"a", "b"});
  ConnId spare = h.JoinAs(MakeJoin("s"));
  h.Disconnect(conns[1]);
  h.Stopped();
  REQUIRE(h.LastAssignment(spare).generation == 2);
  ConnId back = h.JoinAs(MakeJoin("b"));
  CHECK_FALSE(h.closed.count(back));
  CHECK(h.AssignmentsOf(back).empty());  // exactly one of the two runs
  CHECK(h.HasLog("rendezvous head:29400: host 'b' waits as a spare (1 of 1)"));
  CHECK_FALSE(h.ended.has_value());
  // And it is the spare the next time a node goes.
  h.Disconnect(conns[0]);
  h.Stopped();
  CHECK(h.LastAssignment(back).generation == 3);
  CHECK(h.RanksByHost({spare, back}) == std::map<std::string, int>{{"b", 0}, {"s", 1}});
}

TEST_CASE("recovery: a spare and the returning node meet at one re-rendezvous", "[coordinator][recovery]") {
  CoordinatorOptions o = QuietOpts(2, 2);
  o.max_restarts = 3;
  o.spares = 1;
  o.backoff_min = 5s;
  o.backoff_max = 5s;
  Harness h(o);
  std::vector<ConnId> conns = JoinHosts(h, {"a", "b"});
  // b's worker fails: the job backs off; b's agent dies during the wait; a spare
  // and b's new agent both arrive before the wait ends.
  h.Send(conns[1], WorkerFailed{1, 1, 1, 1, "exited with code 1"});
  h.Stopped();
  REQUIRE(StoodBy(h, conns[0]));
  h.Disconnect(conns[1]);
  h.Stopped();
  CHECK_FALSE(h.ended.has_value());
  ConnId spare = h.JoinAs(MakeJoin("s"));
  ConnId back = h.JoinAs(MakeJoin("b"));
  CHECK_FALSE(h.closed.count(spare));
  CHECK_FALSE(h.closed.count(back));
  h.TickAt(5s);
  REQUIRE(h.c.state() == Coordinator::State::kRunning);
  // One of the two joins (the first to arrive), the other waits as a spare.
  CHECK(h.LastAssignment(spare).generation == 2);
  CHECK(h.AssignmentsOf(back).empty());
  CHECK(h.RanksByHost({conns[0], spare}) == std::map<std::string, int>{{"a", 0}, {"s", 1}});
  CHECK_FALSE(h.ended.has_value());
  // During the wait the job holds its nodes and spares, and no more.
  ConnId extra = h.JoinAs(MakeJoin("x"));
  CHECK(h.closed.at(extra) == "job 'job42' already has its 2 nodes and 1 spare");
}

TEST_CASE("recovery: a job that shrinks renumbers its ranks and says how", "[coordinator][recovery]") {
  CoordinatorOptions o = QuietOpts(2, 4);
  o.max_restarts = 2;
  Harness h(o);
  std::vector<ConnId> conns = JoinHosts(h, {"a", "b", "c", "d"}, 2);
  h.Disconnect(conns[1]);  // b: ranks 2-3
  h.Stopped();
  std::vector<ConnId> left = {conns[0], conns[2], conns[3]};
  CHECK(FirstRanks(h, left) == std::map<std::string, int>{{"a", 0}, {"c", 2}, {"d", 4}});
  std::vector<JobEvent> renumbered = h.EventsNamed("ranks_renumbered");
  REQUIRE(renumbered.size() == 1);
  const boost::json::array& moves = renumbered[0].fields.at("moves").as_array();
  REQUIRE(moves.size() == 2);
  CHECK(moves[0].at("host").as_string() == "c");
  CHECK(moves[0].at("old_first_rank").as_int64() == 4);
  CHECK(moves[0].at("first_rank").as_int64() == 2);
  CHECK(moves[1].at("host").as_string() == "d");
  CHECK(h.HasLog(
      "rendezvous head:29400: generation 2 renumbers ranks: node 2 (c) ranks 4-5 -> node 1 ranks 2-3, node 3 (d) "
      "ranks 6-7 -> node 2 ranks 4-5"));
}

TEST_CASE("recovery: a hostile Hello cannot size a stand-alone job's spares", "[coordinator][recovery]") {
  CoordinatorOptions o = Opts(1, 1);
  for (int spares : {-1, kMaxSpares + 1, std::numeric_limits<int>::max()}) {
    o.spares = spares;
    CHECK_FALSE(Validate(o).ok());
  }
  o.spares = kMaxSpares;
  o.max_nodes = std::numeric_limits<int>::max();
  CHECK(Validate(o).ok());
  o.spares = 0;
  o.max_no_progress_restarts = -2;
  CHECK(Validate(o).message() == "--max-no-progress-restarts: -2 is below -1 (off)");
  o.max_no_progress_restarts = -1;
  o.backoff_min = 10s;
  o.backoff_max = 5s;
  CHECK(Validate(o).message() == "--restart-backoff: 10s:5s is not MIN:MAX with 0 <= MIN <= MAX");
}

}  // namespace dlaunch::rendezvous
