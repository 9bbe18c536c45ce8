// The query router alone: events in (a generation, Reports, nodes finishing or
// gone, time), actions out (Query sends, QueryAnswered, HangSuspected,
// HangReport, log lines), with a fake clock.
#include "rendezvous/query_router.hpp"

#include <catch2/catch.hpp>

namespace dlaunch::rendezvous {

using namespace std::chrono_literals;

namespace {

constexpr ConnId kRouterA = 11;  // node 0, ranks 0-1
constexpr ConnId kRouterB = 7;   // node 1, ranks 2-4
const Clock::time_point kRouterT0{};

std::vector<envmap::Node> RouterTable() {
  return {envmap::Node{"a", "10.0.0.1", 2, {}}, envmap::Node{"b", "10.0.0.2", 3, {}}};
}

// A router with a running generation of the two nodes above.
QueryRouter RunningRouter(bool hang_stop = false) {
  QueryRouter router("rendezvous head:29400", hang_stop);
  CHECK(router.OnGeneration({kRouterA, kRouterB}, RouterTable()).empty());
  return router;
}

// "conn:id:what" for each Query sent, in order.
std::vector<std::string> QueriesSent(const std::vector<Action>& actions) {
  std::vector<std::string> out;
  for (const Action& action : actions)
    if (const auto* send = std::get_if<Send>(&action)) {
      const Query& q = std::get<Query>(send->message);
      out.push_back(std::to_string(send->conn) + ":" + std::to_string(q.id) + ":" + q.what);
    }
  return out;
}

template <typename T>
std::vector<T> RouterActionsOf(const std::vector<Action>& actions) {
  std::vector<T> out;
  for (const Action& action : actions)
    if (const auto* t = std::get_if<T>(&action)) out.push_back(*t);
  return out;
}

}  // namespace

TEST_CASE("query_router: no generation, no query", "[query_router]") {
  QueryRouter router("rendezvous", false);
  std::vector<Action> out = router.Ask(3, "status", 5s, kRouterT0);
  REQUIRE(out.size() == 1);
  const auto& answer = std::get<QueryAnswered>(out[0]);
  CHECK(answer.tag == 3);
  CHECK(answer.problem == "no generation is running");
  CHECK(router.open() == 0);

  router = RunningRouter();
  CHECK(router.OnJobEnd().empty());
  CHECK(std::get<QueryAnswered>(router.Ask(4, "status", 5s, kRouterT0).at(0)).problem == "no generation is running");
}

TEST_CASE("query_router: every node asked in connection order; the answer by node rank", "[query_router]") {
  QueryRouter router = RunningRouter();
  CHECK(QueriesSent(router.Ask(9, "status", 5s, kRouterT0)) == std::vector<std::string>{"7:1:status", "11:1:status"});
  CHECK(router.NextDeadline() == kRouterT0 + 5s);
  CHECK(router.OnReport(kRouterA, "node 0 (a)", Report{1, 0, {"r0", "r1"}}).empty());
  std::vector<Action> out = router.OnReport(kRouterB, "node 1 (b)", Report{1, 1, {"r2"}});
  REQUIRE(out.size() == 1);
  const auto& answer = std::get<QueryAnswered>(out[0]);
  CHECK(answer.tag == 9);
  CHECK(answer.what == "status");
  REQUIRE(answer.nodes.size() == 2);
  CHECK(answer.nodes[0].host == "a");
  CHECK(answer.nodes[0].first_rank == 0);
  CHECK(answer.nodes[0].nproc == 2);
  CHECK(answer.nodes[0].items == std::vector<std::string>{"r0", "r1"});
  CHECK(answer.nodes[1].host == "b");
  CHECK(answer.nodes[1].first_rank == 2);
  CHECK(answer.nodes[1].nproc == 3);
  CHECK(answer.nodes[1].answered);
  CHECK(router.open() == 0);
  CHECK_FALSE(router.NextDeadline());
}

TEST_CASE("query_router: the deadline names the nodes that did not answer", "[query_router]") {
  QueryRouter router = RunningRouter();
  router.Ask(1, "stacks", 2500ms, kRouterT0);
  router.OnReport(kRouterB, "node 1 (b)", Report{1, 1, {}});
  CHECK(router.OnTick(kRouterT0 + 2499ms).empty());
  std::vector<QueryAnswered> answers = RouterActionsOf<QueryAnswered>(router.OnTick(kRouterT0 + 2500ms));
  REQUIRE(answers.size() == 1);
  CHECK_FALSE(answers[0].nodes[0].answered);
  CHECK(answers[0].nodes[0].problem == "no answer within 2500ms");
  CHECK(answers[0].nodes[1].answered);
}

TEST_CASE("query_router: finished nodes are named, and not asked again", "[query_router]") {
  QueryRouter router = RunningRouter();
  router.Ask(1, "status", 5s, kRouterT0);
  CHECK(router.OnNodeDone(kRouterA).empty());  // b has not answered yet
  std::vector<QueryAnswered> answers = RouterActionsOf<QueryAnswered>(router.OnNodeDone(kRouterB));
  REQUIRE(answers.size() == 1);
  CHECK(answers[0].nodes[0].problem == "its ranks finished before it answered");
  CHECK(answers[0].nodes[1].problem == "its ranks finished before it answered");

  // Every node finished: the next query is answered at once, asking nobody.
  std::vector<Action> out = router.Ask(2, "status", 5s, kRouterT0);
  CHECK(QueriesSent(out).empty());
  answers = RouterActionsOf<QueryAnswered>(out);
  REQUIRE(answers.size() == 1);
  CHECK(answers[0].nodes.size() == 2);
  CHECK(answers[0].nodes[1].problem == "its ranks have finished");
}

TEST_CASE("query_router: a node gone ends its part of an on-demand query, not of the hang query", "[query_router]") {
  QueryRouter router = RunningRouter();
  router.AskForHang(30s, kRouterT0);       // id 1
  router.Ask(5, "status", 5s, kRouterT0);  // id 2
  router.OnReport(kRouterA, "node 0 (a)", Report{1, 0, {}});
  router.OnReport(kRouterA, "node 0 (a)", Report{2, 0, {}});
  std::vector<Action> out = router.OnNodeGone(kRouterB, "left");
  REQUIRE(out.size() == 1);
  CHECK(std::get<QueryAnswered>(out[0]).nodes[1].problem == "left");
  CHECK(router.hang_open());
  // Later queries leave it out.
  CHECK(QueriesSent(router.Ask(6, "status", 5s, kRouterT0)) == std::vector<std::string>{"11:3:status"});
  std::vector<HangReport> reports = RouterActionsOf<HangReport>(router.OnTick(kRouterT0 + kHangReportTimeout));
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].nodes[1].problem == "no answer within 15s");
  CHECK_FALSE(router.hang_open());
}

TEST_CASE("query_router: a hang query asks the running nodes, then says so", "[query_router]") {
  QueryRouter router = RunningRouter();
  router.OnNodeDone(kRouterA);
  std::vector<Action> out = router.AskForHang(42s, kRouterT0);
  CHECK(QueriesSent(out) == std::vector<std::string>{"7:1:stacks"});
  REQUIRE(std::holds_alternative<HangSuspected>(out.back()));
  CHECK(std::get<HangSuspected>(out.back()).silent == 42s);
  CHECK(std::get<HangSuspected>(out.back()).nodes == 1);
  CHECK(router.hang_open());
  // The hang query is not one of the kMaxOpenQueries on-demand ones.
  for (std::uint64_t tag = 0; tag < kMaxOpenQueries; ++tag) router.Ask(tag, "status", 5s, kRouterT0);
  CHECK(std::get<QueryAnswered>(router.Ask(99, "status", 5s, kRouterT0).at(0)).problem ==
        "16 queries are open already");
  std::vector<HangReport> reports =
      RouterActionsOf<HangReport>(router.OnReport(kRouterB, "node 1 (b)", Report{1, 1, {"s"}}));
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].silent == 42s);
  CHECK_FALSE(reports[0].stop);
  REQUIRE(reports[0].nodes.size() == 1);  // only the node asked
  CHECK(reports[0].nodes[0].host == "b");
}

TEST_CASE("query_router: a stopping hang report is the last action; the job's end answers the rest", "[query_router]") {
  QueryRouter router = RunningRouter(/*hang_stop=*/true);
  router.AskForHang(30s, kRouterT0);       // id 1
  router.Ask(8, "status", 5s, kRouterT0);  // id 2
  router.OnReport(kRouterB, "node 1 (b)", Report{1, 1, {}});
  router.OnReport(kRouterB, "node 1 (b)", Report{2, 1, {}});
  // a finishing completes both; the hang report stops the job before the other.
  std::vector<Action> out = router.OnNodeDone(kRouterA);
  REQUIRE(out.size() == 1);
  CHECK(std::get<HangReport>(out[0]).stop);
  CHECK(router.open() == 1);
  out = router.OnJobEnd();
  REQUIRE(out.size() == 1);
  const auto& answer = std::get<QueryAnswered>(out[0]);
  CHECK(answer.tag == 8);
  CHECK(answer.nodes[0].problem == "its ranks finished before it answered");
  CHECK(answer.nodes[1].answered);
}

TEST_CASE("query_router: a new generation answers the open queries and drops the hang query", "[query_router]") {
  QueryRouter router = RunningRouter();
  router.AskForHang(30s, kRouterT0);
  router.Ask(1, "status", 5s, kRouterT0);
  std::vector<Action> out = router.OnGeneration({kRouterB}, {envmap::Node{"b", "10.0.0.2", 1, {}}});
  REQUIRE(out.size() == 1);  // no HangReport
  CHECK(std::get<QueryAnswered>(out[0]).nodes[0].problem == "a new generation began before it answered");
  CHECK_FALSE(router.hang_open());
  CHECK(QueriesSent(router.Ask(2, "status", 5s, kRouterT0)) == std::vector<std::string>{"7:3:status"});
}

TEST_CASE("query_router: a report out of place is ignored with one line", "[query_router]") {
  QueryRouter router = RunningRouter();
  router.Ask(1, "status", 5s, kRouterT0);
  struct Case {
    ConnId conn;
    std::string name;
    Report report;
    std::string line;
  };
  std::vector<Case> cases = {
      {kRouterA, "node 0 (a)", Report{5, 0, {}},
       "rendezvous head:29400: ignoring a report for query 5 from node 0 (a) (no such query is open)"},
      {99, "host 'c'", Report{1, 0, {}},
       "rendezvous head:29400: ignoring a report for query 1 from host 'c' (it was not asked, or has answered "
       "already)"},
      {kRouterA, "node 0 (a)", Report{1, 1, {}},
       "rendezvous head:29400: ignoring a report for query 1 from node 0 (a) (it says it is node 1)"},
      {kRouterA, "node 0 (a)", Report{1, 0, {"x", "y", "z"}},
       "rendezvous head:29400: ignoring a report for query 1 from node 0 (a) (3 items for 2 ranks)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.line);
    std::vector<Action> out = router.OnReport(c.conn, c.name, c.report);
    REQUIRE(out.size() == 1);
    CHECK(std::get<Log>(out[0]).line == c.line);
    CHECK(std::get<Log>(out[0]).limit == "ignored messages");
  }
  CHECK(router.open() == 1);  // still waiting for both
}

}  // namespace dlaunch::rendezvous
