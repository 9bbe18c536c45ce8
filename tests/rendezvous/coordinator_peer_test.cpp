// What a joined peer may say that it should not: numbers outside their range are
// clamped with one line, and the lines a peer can repeat at will carry a kind
// (Log::limit) for the session layer's rate limit.
#include "rendezvous/coordinator.hpp"

#include <catch2/catch.hpp>

#include "tests/rendezvous/coordinator_harness.hpp"

namespace dlaunch::rendezvous {

using testing::Harness;
using testing::MakeJoin;
using testing::Opts;
using namespace std::chrono_literals;

namespace {

const std::string kSubject = "rendezvous head:29400: ";

// Two nodes of two ranks each: a is node 0 (ranks 0-1), b node 1 (ranks 2-3).
struct PeerJob {
  explicit PeerJob(CoordinatorOptions o = Opts(2, 2)) : h(std::move(o)) {
    a = h.JoinAs(MakeJoin("a", 2));
    b = h.JoinAs(MakeJoin("b", 2));
    REQUIRE(h.LastAssignment(b).node_rank == 1);
  }
  // The limit of the log line `line`; "(none)" when there is no such line.
  std::string LimitOf(const std::string& line) const {
    for (size_t i = 0; i < h.logs.size(); ++i)
      if (h.logs[i] == line) return h.limits[i];
    return "(none)";
  }
  Harness h;
  ConnId a = 0, b = 0;
};

}  // namespace

TEST_CASE("peer: a worker failure's code outside 1..255 counts as 1, with one line", "[coordinator][peer]") {
  // 256 would leave every dlaunch with exit status 0 (256 & 0xff).
  for (int code : {256, -1, 1 << 30}) {
    PeerJob j;
    j.h.Send(j.b, WorkerFailed{1, 1, 2, code, "exited badly"});
    REQUIRE(j.h.ended.has_value());
    CHECK(j.h.ended->exit_code == 1);
    CHECK(j.h.inbox[j.a].back() == Message(Abort{kSubject + "node 1 (b) rank 2 exited badly", 1}));
    std::string line = fmt::format("{}node 1 (b) says a worker failed with code {}; counting 1", kSubject, code);
    CHECK(j.LimitOf(line) == "messages with a bad number");
  }
}

TEST_CASE("peer: a done code outside 0..255 counts as 1, with one line", "[coordinator][peer]") {
  PeerJob j;
  j.h.Send(j.a, Done{1, 0, 512});
  REQUIRE(j.h.ended.has_value());
  CHECK(j.h.ended->exit_code == 1);
  CHECK(j.h.ended->summary == kSubject + "node 0 (a) finished with exit code 1");
  CHECK(j.LimitOf(kSubject + "node 0 (a) says it finished with exit code 512; counting 1") ==
        "messages with a bad number");
}

TEST_CASE("peer: a failed rank that is not the node's own is not named", "[coordinator][peer]") {
  PeerJob j;
  j.h.Send(j.b, WorkerFailed{1, 1, -7, 3, "exited with code 3"});
  REQUIRE(j.h.ended.has_value());
  CHECK(j.h.ended->exit_code == 3);
  CHECK(j.h.ended->summary == kSubject + "node 1 (b) a rank exited with code 3");
  CHECK(j.LimitOf(kSubject + "node 1 (b) says rank -7 failed, which is not one of its ranks 2-3") ==
        "messages with a bad number");
}

TEST_CASE("peer: lines a peer can repeat carry a kind; the job's own carry none", "[coordinator][peer]") {
  CoordinatorOptions o = Opts(2, 2);
  o.hang_timeout = 1h;  // heartbeats' silence is read only with a hang watch
  PeerJob j(o);
  j.h.Send(j.a, Heartbeat{-1});
  j.h.Send(j.a, WorkerFailed{7, 0, 0, 1, ""});
  j.h.Send(j.a, Done{7, 0, 0});
  j.h.Send(j.a, Report{99, 0, {}});
  CHECK(j.LimitOf(kSubject + "generation 1: 2 nodes, 4 workers, master 10.1.a:29500, restart 0 of 0") == "");
  CHECK(j.LimitOf(kSubject + "node 0 (a) says its ranks have been silent for -1ms; counting 0") ==
        "heartbeats with a negative silence");
  CHECK(j.LimitOf(kSubject + "ignoring a worker failure of generation 7 from node 0 (a) (now 1)") ==
        "ignored messages");
  CHECK(j.LimitOf(kSubject + "ignoring done of generation 7 from node 0 (a) (now 1)") == "ignored messages");
  CHECK(j.LimitOf(kSubject + "ignoring a report for query 99 from node 0 (a) (no such query is open)") ==
        "ignored messages");
  j.h.Disconnect(j.b);
  // The job's end is its summary, which the server logs: not a Log line.
  REQUIRE(j.h.ended.has_value());
  CHECK(j.h.ended->summary == kSubject + "node 1 (b) lost (connection closed)");
  CHECK(j.LimitOf(j.h.ended->summary) == "(none)");
}

}  // namespace dlaunch::rendezvous
