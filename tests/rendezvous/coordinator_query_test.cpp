// On-demand queries: the process hosting the coordinator asks every running node
// a question (the live view's "status" and "stacks") and gets every node's items
// in one QueryAnswered, beside and apart from the hang query.
#include "rendezvous/coordinator.hpp"

#include <catch2/catch.hpp>

#include "tests/rendezvous/coordinator_harness.hpp"

namespace dlaunch::rendezvous {

using testing::Harness;
using testing::MakeJoin;
using testing::Opts;
using namespace std::chrono_literals;

namespace {

// Two nodes of two ranks each: a is node 0 (ranks 0-1), b node 1 (ranks 2-3).
struct QueryJob {
  explicit QueryJob(CoordinatorOptions o) : h(std::move(o)) {
    a = h.JoinAs(MakeJoin("a", 2));
    b = h.JoinAs(MakeJoin("b", 2));
    REQUIRE(h.LastAssignment(a).node_rank == 0);
    REQUIRE(h.LastAssignment(b).node_rank == 1);
  }
  void Ask(std::uint64_t tag, const std::string& what, std::chrono::milliseconds timeout = 5s) {
    h.Apply(h.c.Ask(tag, what, timeout, h.now));
  }
  std::vector<Query> Queries(ConnId conn) {
    std::vector<Query> out;
    for (const Message& m : h.inbox[conn])
      if (auto* q = std::get_if<Query>(&m)) out.push_back(*q);
    return out;
  }
  Harness h;
  ConnId a = 0;
  ConnId b = 0;
};

CoordinatorOptions Quiet() {
  CoordinatorOptions o = Opts(2, 2);
  o.heartbeat_timeout = 1h;
  return o;
}

}  // namespace

TEST_CASE("query: every node's items in one answer, with the caller's tag", "[coordinator][query]") {
  QueryJob j(Quiet());
  j.Ask(7, "status");
  CHECK(j.Queries(j.a) == std::vector<Query>{{1, "status"}});
  CHECK(j.Queries(j.b) == std::vector<Query>{{1, "status"}});
  CHECK(*j.h.c.NextDeadline() == j.h.t0 + 5s);
  j.h.Send(j.b, Report{1, 1, {"r2", "r3"}});
  CHECK(j.h.answered.empty());
  j.h.Send(j.a, Report{1, 0, {"r0", "r1"}});
  REQUIRE(j.h.answered.size() == 1);
  const QueryAnswered& q = j.h.answered[0];
  CHECK(q.tag == 7);
  CHECK(q.what == "status");
  CHECK(q.problem.empty());
  REQUIRE(q.nodes.size() == 2);
  CHECK(q.nodes[0].host == "a");
  CHECK(q.nodes[0].answered);
  CHECK(q.nodes[0].items == std::vector<std::string>{"r0", "r1"});
  CHECK(q.nodes[1].first_rank == 2);
  CHECK(q.nodes[1].items == std::vector<std::string>{"r2", "r3"});
  CHECK(j.h.reports.empty());
  CHECK_FALSE(j.h.ended);
}

TEST_CASE("query: a node silent until the deadline is named, the others kept", "[coordinator][query]") {
  QueryJob j(Quiet());
  j.Ask(1, "stacks", 3s);
  j.h.Send(j.a, Report{1, 0, {"s0", "s1"}});
  j.h.TickAt(3s - 1ms);
  CHECK(j.h.answered.empty());
  j.h.TickAt(3s);
  REQUIRE(j.h.answered.size() == 1);
  const QueryAnswered& q = j.h.answered[0];
  CHECK(q.nodes[0].answered);
  CHECK_FALSE(q.nodes[1].answered);
  CHECK(q.nodes[1].problem == "no answer within 3s");
  CHECK(q.nodes[1].host == "b");
  // A late report is ignored with a line, and the job runs on.
  j.h.Send(j.b, Report{1, 1, {"s2", "s3"}});
  CHECK(j.h.HasLog("rendezvous head:29400: ignoring a report for query 1 from node 1 (b) (no such query is open)"));
  CHECK(j.h.answered.size() == 1);
  CHECK(j.h.c.state() == Coordinator::State::kRunning);
}

TEST_CASE("query: concurrent queries and a hang query keep their own ids", "[coordinator][query]") {
  CoordinatorOptions o = Quiet();
  o.hang_timeout = 5s;
  QueryJob j(o);
  j.Ask(100, "status", 30s);
  j.Ask(200, "stacks", 30s);
  j.h.now = j.h.t0 + 6s;
  j.h.Send(j.a, Heartbeat{6000});
  j.h.Send(j.b, Heartbeat{6000});
  j.h.TickAt(6s);
  REQUIRE(j.h.suspected.size() == 1);
  CHECK(j.Queries(j.a) == std::vector<Query>{{1, "status"}, {2, "stacks"}, {3, "stacks"}});
  // Answers in any order go to the query they name.
  j.h.Send(j.a, Report{3, 0, {"hang0", "hang1"}});
  j.h.Send(j.b, Report{2, 1, {"s2", "s3"}});
  j.h.Send(j.a, Report{2, 0, {"s0", "s1"}});
  REQUIRE(j.h.answered.size() == 1);
  CHECK(j.h.answered[0].tag == 200);
  CHECK(j.h.answered[0].nodes[0].items == std::vector<std::string>{"s0", "s1"});
  j.h.Send(j.b, Report{3, 1, {"hang2", "hang3"}});
  REQUIRE(j.h.reports.size() == 1);
  CHECK(j.h.reports[0].nodes[1].items == std::vector<std::string>{"hang2", "hang3"});
  j.h.Send(j.b, Report{1, 1, {"r2", "r3"}});
  j.h.Send(j.a, Report{1, 0, {"r0", "r1"}});
  REQUIRE(j.h.answered.size() == 2);
  CHECK(j.h.answered[1].tag == 100);
  CHECK(j.h.answered[1].nodes[1].items == std::vector<std::string>{"r2", "r3"});
  // A second answer to a query is ignored.
  j.h.Send(j.a, Report{1, 0, {"again"}});
  CHECK(j.h.answered.size() == 2);
}

TEST_CASE("query: a report for another node or with too many items is ignored", "[coordinator][query]") {
  QueryJob j(Quiet());
  j.Ask(1, "status");
  j.h.Send(j.a, Report{1, 1, {"x"}});
  CHECK(j.h.HasLog("rendezvous head:29400: ignoring a report for query 1 from node 0 (a) (it says it is node 1)"));
  j.h.Send(j.a, Report{1, 0, {"x", "y", "z"}});
  CHECK(j.h.HasLog("rendezvous head:29400: ignoring a report for query 1 from node 0 (a) (3 items for 2 ranks)"));
  CHECK(j.h.answered.empty());
}

TEST_CASE("query: a finished node is not asked; a node finishing or lost is named", "[coordinator][query]") {
  QueryJob j(Quiet());
  j.h.Send(j.a, Done{1, 0, 0});
  j.Ask(1, "status");
  CHECK(j.Queries(j.a).empty());
  j.h.Send(j.b, Report{1, 1, {"r2", "r3"}});
  REQUIRE(j.h.answered.size() == 1);
  CHECK(j.h.answered[0].nodes[0].problem == "its ranks have finished");
  CHECK(j.h.answered[0].nodes[1].answered);

  QueryJob k(Quiet());
  k.Ask(2, "status");
  k.h.Send(k.a, Done{1, 0, 0});
  CHECK(k.h.answered.empty());
  k.h.Disconnect(k.b);
  REQUIRE(k.h.answered.size() == 1);
  CHECK(k.h.answered[0].nodes[0].problem == "its ranks finished before it answered");
  CHECK(k.h.answered[0].nodes[1].problem == "lost (connection closed)");
  REQUIRE(k.h.ended);  // the lost node ends the job, after the answer
}

TEST_CASE("query: the job's end or a new generation answers the open queries", "[coordinator][query]") {
  QueryJob j(Quiet());
  j.Ask(1, "stacks");
  j.h.Apply(j.h.c.AbortJob(1, "stop"));
  REQUIRE(j.h.answered.size() == 1);
  CHECK(j.h.answered[0].nodes[0].problem == "the job ended before it answered");
  CHECK(j.h.answered[0].nodes[1].problem == "the job ended before it answered");
  REQUIRE(j.h.ended);
  // Asked after the end: answered at once.
  j.Ask(2, "status");
  REQUIRE(j.h.answered.size() == 2);
  CHECK(j.h.answered[1].problem == "no generation is running");
  CHECK(j.h.answered[1].nodes.empty());

  CoordinatorOptions o = Quiet();
  o.max_restarts = 1;
  QueryJob k(o);
  k.Ask(3, "status");
  k.h.Send(k.a, WorkerFailed{1, 0, 0, 1, ""});
  REQUIRE(k.h.answered.size() == 1);
  CHECK(k.h.answered[0].nodes[1].problem == "the generation stopped before it answered");
  k.h.Stopped();
  CHECK(k.h.c.generation() == 2);
}

TEST_CASE("query: while gathering, and past kMaxOpenQueries, answered at once", "[coordinator][query]") {
  Harness h(Quiet());
  h.JoinAs(MakeJoin("a", 2));
  h.Apply(h.c.Ask(1, "status", 5s, h.now));
  REQUIRE(h.answered.size() == 1);
  CHECK(h.answered[0].problem == "no generation is running");

  QueryJob j(Quiet());
  for (std::size_t i = 0; i < kMaxOpenQueries; ++i) j.Ask(i, "status");
  CHECK(j.h.answered.empty());
  j.Ask(99, "status");
  REQUIRE(j.h.answered.size() == 1);
  CHECK(j.h.answered[0].tag == 99);
  CHECK(j.h.answered[0].problem == "16 queries are open already");
  CHECK(j.Queries(j.a).size() == kMaxOpenQueries);
}

}  // namespace dlaunch::rendezvous
