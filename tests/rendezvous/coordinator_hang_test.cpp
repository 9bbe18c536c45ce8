// HangJob-wide hangs: the coordinator judges silence from the silent_ms of every
// running node's heartbeats, asks each node for its stacks, and reports them all
// in one HangReport (then, with hang_stop, ends the job with 124).
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

CoordinatorOptions HangOpts(bool stop = false) {
  CoordinatorOptions o = Opts(2, 2);
  o.heartbeat_timeout = 1h;  // no node is lost in these tests
  o.hang_timeout = 5s;
  o.hang_stop = stop;
  return o;
}

// Two nodes of two ranks each: a is node 0 (ranks 0-1), b node 1 (ranks 2-3).
struct HangJob {
  explicit HangJob(CoordinatorOptions o) : h(std::move(o)) {
    a = h.JoinAs(MakeJoin("a", 2));
    b = h.JoinAs(MakeJoin("b", 2));
    REQUIRE(h.LastAssignment(a).node_rank == 0);
    REQUIRE(h.LastAssignment(b).node_rank == 1);
  }
  // At `at` since t0, a and b beat saying their ranks were silent that long.
  void Beat(Clock::duration at, std::chrono::milliseconds silent_a, std::chrono::milliseconds silent_b) {
    h.now = h.t0 + at;
    h.Send(a, Heartbeat{static_cast<int>(silent_a.count())});
    h.Send(b, Heartbeat{static_cast<int>(silent_b.count())});
    h.TickAt(at);
  }
  std::optional<Query> LastQuery(ConnId conn) {
    for (auto it = h.inbox[conn].rbegin(); it != h.inbox[conn].rend(); ++it)
      if (auto* q = std::get_if<Query>(&*it)) return *q;
    return std::nullopt;
  }
  Harness h;
  ConnId a = 0;
  ConnId b = 0;
};

}  // namespace

TEST_CASE("hang: one node printing keeps the job un-hung while the other is silent", "[coordinator][hang]") {
  HangJob j(HangOpts());
  j.Beat(10s, 10s, 0ms);
  j.Beat(20s, 20s, 500ms);
  j.Beat(30s, 30s, 1s);
  CHECK(j.h.suspected.empty());
  CHECK_FALSE(j.LastQuery(j.a));
  CHECK(j.h.c.state() == Coordinator::State::kRunning);
}

TEST_CASE("hang: every node silent for the timeout -> a stacks query to every node", "[coordinator][hang]") {
  HangJob j(HangOpts());
  j.Beat(4s, 4s, 4s);
  // Time since a heartbeat is not silence: the nodes may have written since.
  j.h.TickAt(9s);
  CHECK(j.h.suspected.empty());
  j.Beat(6s, 6s, 6s);
  REQUIRE(j.h.suspected.size() == 1);
  CHECK(j.h.suspected[0].silent == 6s);
  CHECK(j.h.suspected[0].nodes == 2);
  CHECK(j.LastQuery(j.a) == Query{1, "stacks"});
  CHECK(j.LastQuery(j.b) == Query{1, "stacks"});
  CHECK(*j.h.c.NextDeadline() == j.h.t0 + 6s + kHangReportTimeout);
  // The open query is not asked again.
  j.Beat(7s, 7s, 7s);
  CHECK(j.h.suspected.size() == 1);
}

TEST_CASE("hang: silence counts from the latest output of any node and the earliest beat", "[coordinator][hang]") {
  HangJob j(HangOpts());
  // b wrote at 2 s. With a's last beat at 6 s, the job is known silent from 2 s
  // to 6 s only, whatever b says later: a may have written after 6 s.
  j.Beat(6s, 6s, 4s);
  j.h.now = j.h.t0 + 9s;
  j.h.Send(j.b, Heartbeat{7000});
  j.h.TickAt(9s);
  CHECK(j.h.suspected.empty());
  j.h.now = j.h.t0 + 9500ms;
  j.h.Send(j.a, Heartbeat{9500});
  j.h.TickAt(9500ms);
  REQUIRE(j.h.suspected.size() == 1);
  CHECK(j.h.suspected[0].silent == 7s);  // from 2 s to b's beat at 9 s
}

TEST_CASE("hang: a beat cannot claim silence from before its generation", "[coordinator][hang]") {
  HangJob j(HangOpts());
  j.Beat(1s, 100h, 100h);  // the last generation's ranks, or a lie
  CHECK(j.h.suspected.empty());
  j.Beat(5s, 100h, 100h);
  REQUIRE(j.h.suspected.size() == 1);
  CHECK(j.h.suspected[0].silent == 5s);
}

TEST_CASE("hang: every node's report -> one HangReport, and the job runs on", "[coordinator][hang]") {
  HangJob j(HangOpts());
  j.Beat(6s, 6s, 6s);
  j.h.now = j.h.t0 + 7s;
  j.h.Send(j.b, Report{1, 1, {R"({"rank":2})", R"({"rank":3})"}});
  CHECK(j.h.reports.empty());
  j.h.Send(j.a, Report{1, 0, {R"({"rank":0})", R"({"rank":1})"}});
  REQUIRE(j.h.reports.size() == 1);
  const HangReport& r = j.h.reports[0];
  CHECK(r.silent == 6s);
  CHECK_FALSE(r.stop);
  REQUIRE(r.nodes.size() == 2);
  CHECK(r.nodes[0].node_rank == 0);
  CHECK(r.nodes[0].host == "a");
  CHECK(r.nodes[0].first_rank == 0);
  CHECK(r.nodes[0].nproc == 2);
  CHECK(r.nodes[0].answered);
  CHECK(r.nodes[0].items == std::vector<std::string>{R"({"rank":0})", R"({"rank":1})"});
  CHECK(r.nodes[1].first_rank == 2);
  CHECK(r.nodes[1].items == std::vector<std::string>{R"({"rank":2})", R"({"rank":3})"});
  CHECK_FALSE(j.h.ended);
  CHECK(j.h.closed.empty());
  CHECK(j.h.c.state() == Coordinator::State::kRunning);
}

TEST_CASE("hang: a node that does not answer is named at the deadline", "[coordinator][hang]") {
  HangJob j(HangOpts());
  j.Beat(6s, 6s, 6s);
  j.h.now = j.h.t0 + 7s;
  j.h.Send(j.a, Report{1, 0, {R"({"rank":0})", R"({"rank":1})"}});
  j.h.TickAt(6s + kHangReportTimeout - 1ms);
  CHECK(j.h.reports.empty());
  j.h.TickAt(6s + kHangReportTimeout);
  REQUIRE(j.h.reports.size() == 1);
  const HangReport& r = j.h.reports[0];
  REQUIRE(r.nodes.size() == 2);
  CHECK(r.nodes[0].answered);
  CHECK_FALSE(r.nodes[1].answered);
  CHECK(r.nodes[1].problem == "no answer within 15s");
  CHECK(r.nodes[1].items.empty());
  // Its late answer is for a query that is closed.
  j.h.Send(j.b, Report{1, 1, {R"({"rank":2})"}});
  CHECK(j.h.HasLog("rendezvous head:29400: ignoring a report for query 1 from node 1 (b) (no such query is open)"));
  CHECK(j.h.reports.size() == 1);
  CHECK(j.h.closed.empty());
}

TEST_CASE("hang: a node whose ranks finish while asked is named as finished", "[coordinator][hang]") {
  HangJob j(HangOpts());
  j.Beat(6s, 6s, 6s);
  j.h.Send(j.b, Done{1, 1, 0});
  CHECK(j.h.reports.empty());
  j.h.Send(j.a, Report{1, 0, {R"({"rank":0})", R"({"rank":1})"}});
  REQUIRE(j.h.reports.size() == 1);
  CHECK(j.h.reports[0].nodes[1].problem == "its ranks finished before it answered");
  CHECK_FALSE(j.h.ended);
}

TEST_CASE("hang: --hang-action stop ends the job with 124 after the report", "[coordinator][hang]") {
  HangJob j(HangOpts(true));
  j.Beat(6s, 6s, 6s);
  j.h.Send(j.a, Report{1, 0, {R"({"rank":0})", R"({"rank":1})"}});
  j.h.Send(j.b, Report{1, 1, {R"({"rank":2})", R"({"rank":3})"}});
  REQUIRE(j.h.reports.size() == 1);
  CHECK(j.h.reports[0].stop);
  const std::string line = "rendezvous head:29400: no rank on any node made progress for 6s (--hang-action stop)";
  REQUIRE(j.h.ended.has_value());
  CHECK(j.h.ended->exit_code == 124);
  CHECK(j.h.ended->summary == line);
  CHECK(j.h.inbox[j.a].back() == Message(Abort{line, 124}));
  CHECK(j.h.inbox[j.b].back() == Message(Abort{line, 124}));
  CHECK(j.h.c.state() == Coordinator::State::kEnded);
}

TEST_CASE("hang: --hang-action stop with a silent node stops at the deadline", "[coordinator][hang]") {
  HangJob j(HangOpts(true));
  j.Beat(6s, 6s, 6s);
  j.h.Send(j.a, Report{1, 0, {}});
  j.h.TickAt(6s + kHangReportTimeout);
  REQUIRE(j.h.reports.size() == 1);
  REQUIRE(j.h.ended.has_value());
  CHECK(j.h.ended->exit_code == 124);
}

TEST_CASE("hang: reported again only after new output and a new full silence", "[coordinator][hang]") {
  HangJob j(HangOpts());
  j.Beat(6s, 6s, 6s);
  j.h.Send(j.a, Report{1, 0, {}});
  j.h.Send(j.b, Report{1, 1, {}});
  REQUIRE(j.h.reports.size() == 1);
  // Still the same silence (the beats' delays move the estimate a little): no report.
  j.Beat(12s, 12s, 11800ms);
  j.Beat(30s, 30s, 30s);
  CHECK(j.h.suspected.size() == 1);
  // b writes at 31 s; the job is silent again from then.
  j.Beat(32s, 32s, 1s);
  j.Beat(35s, 35s, 4s);
  CHECK(j.h.suspected.size() == 1);
  j.Beat(36s, 36s, 5s);
  REQUIRE(j.h.suspected.size() == 2);
  CHECK(j.h.suspected[1].silent == 5s);
  CHECK(j.LastQuery(j.a) == Query{2, "stacks"});
}

TEST_CASE("hang: a new generation forgets the open query", "[coordinator][hang]") {
  CoordinatorOptions o = HangOpts();
  o.max_restarts = 1;
  HangJob j(o);
  j.Beat(6s, 6s, 6s);
  j.h.Send(j.a, WorkerFailed{1, 0, 1, 3, "exited with code 3"});
  j.h.Stopped();
  REQUIRE(j.h.c.generation() == 2);
  j.h.Send(j.a, Report{1, 0, {}});
  CHECK(j.h.HasLog("rendezvous head:29400: ignoring a report for query 1 from node 0 (a) (no such query is open)"));
  CHECK(j.h.reports.empty());
  // Silence counts from the new generation (assigned at 6 s).
  j.Beat(10s, 10s, 10s);
  CHECK(j.h.suspected.size() == 1);
  j.Beat(11s, 11s, 11s);
  REQUIRE(j.h.suspected.size() == 2);
  CHECK(j.h.suspected[1].silent == 5s);
  CHECK(j.LastQuery(j.b) == Query{2, "stacks"});
}

TEST_CASE("hang: hostile and unsolicited reports are ignored with one line each", "[coordinator][hang]") {
  HangJob j(HangOpts());
  j.h.Send(j.a, Report{1, 0, {"{}"}});
  j.Beat(6s, 6s, 6s);
  j.h.Send(j.a, Report{99, 0, {"{}"}});
  j.h.Send(j.a, Report{1, 5, {"{}"}});
  j.h.Send(j.a, Report{1, 0, {"{}", "{}", "{}"}});
  j.h.Send(j.a, Report{1, 0, {"not json at all"}});  // kept as sent: the host judges items
  j.h.Send(j.a, Report{1, 0, {"{}"}});
  j.h.now = j.h.t0 + 7s;
  j.h.Send(j.a, Heartbeat{-5});
  const std::string s = "rendezvous head:29400: ";
  CHECK(j.h.logs == std::vector<std::string>{
                        s + "generation 1: 2 nodes, 4 workers, master 10.1.a:29500, restart 0 of 0",
                        s + "ignoring a report for query 1 from node 0 (a) (no such query is open)",
                        s + "ignoring a report for query 99 from node 0 (a) (no such query is open)",
                        s + "ignoring a report for query 1 from node 0 (a) (it says it is node 5)",
                        s + "ignoring a report for query 1 from node 0 (a) (3 items for 2 ranks)",
                        s + "ignoring a report for query 1 from node 0 (a) (it was not asked, or has answered already)",
                        s + "node 0 (a) says its ranks have been silent for -5ms; counting 0",
                    });
  CHECK(j.h.closed.empty());
  CHECK(j.h.reports.empty());
  j.h.Send(j.b, Report{1, 1, {}});
  REQUIRE(j.h.reports.size() == 1);
  CHECK(j.h.reports[0].nodes[0].items == std::vector<std::string>{"not json at all"});
  // A Query is the coordinator's to send.
  j.h.Send(j.b, Query{1, "stacks"});
  CHECK(j.h.closed.at(j.b) == "unexpected query from an agent");
}

TEST_CASE("hang: off unless hang_timeout is set", "[coordinator][hang]") {
  CoordinatorOptions o = HangOpts();
  o.hang_timeout = 0ms;
  HangJob j(o);
  j.Beat(100h, 100h, 100h);
  CHECK(j.h.suspected.empty());
  CHECK_FALSE(j.LastQuery(j.a));
}

TEST_CASE("hang: a negative hang timeout is refused", "[coordinator][hang]") {
  CoordinatorOptions o = HangOpts();
  o.hang_timeout = -1s;
  CHECK(Validate(o).message() == "--hang-timeout: -1s is negative");
}

}  // namespace dlaunch::rendezvous
