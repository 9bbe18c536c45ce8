// The agent's side of job-wide hangs: the hang settings in the Hello, the ranks'
// silence in each Heartbeat, and a Query answered with a Report.
#include "rendezvous/agent_machine.hpp"

#include <limits>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "tests/rendezvous/agent_harness.hpp"

namespace dlaunch::rendezvous {

using namespace agent_testing;
using namespace std::chrono_literals;

TEST_CASE("agent: the Hello carries the job's hang settings, capped to the wire", "[agent][hang]") {
  AgentMachineOptions o = Options();
  o.hang_timeout = 1800s;
  o.hang_stop = true;
  AgentHarness h(o);
  h.Start();
  std::optional<Hello> hello = Sent<Hello>(h.Connected());
  REQUIRE(hello);
  CHECK(hello->hang_timeout_ms == 1'800'000);
  CHECK(hello->hang_stop == 1);

  o.hang_timeout = std::chrono::hours(24 * 365);
  o.hang_stop = false;
  AgentHarness big(o);
  big.Start();
  hello = Sent<Hello>(big.Connected());
  REQUIRE(hello);
  CHECK(hello->hang_timeout_ms == std::numeric_limits<int>::max());
  CHECK(hello->hang_stop == 0);
}

TEST_CASE("agent: heartbeats carry the ranks' silence while running, 0 otherwise", "[agent][hang]") {
  AgentMachineOptions o = Options();
  std::chrono::milliseconds silent{1234};
  o.silence = [&silent] { return silent; };
  AgentHarness h(o);
  h.Handshake(Challenge{});
  // Joined, no workers yet: nothing to be silent.
  std::optional<Heartbeat> beat = Sent<Heartbeat>(h.TickAt(5s));
  REQUIRE(beat);
  CHECK(beat->silent_ms == 0);
  h.Receive(Gen(1));
  beat = Sent<Heartbeat>(h.TickAt(10s));
  REQUIRE(beat);
  CHECK(beat->silent_ms == 1234);
  silent = std::chrono::hours(24 * 365);  // capped, never wrapped
  beat = Sent<Heartbeat>(h.TickAt(15s));
  REQUIRE(beat);
  CHECK(beat->silent_ms == std::numeric_limits<int>::max());
  // Stopping: the ranks are going away, and were not silent by choice.
  h.Receive(Abort{"rendezvous head:29400: node 0 (b) rank 0 exited with code 3", 3});
  beat = Sent<Heartbeat>(h.TickAt(20s));
  REQUIRE(beat);
  CHECK(beat->silent_ms == 0);
}

TEST_CASE("agent: a Query while running asks the session; Answer sends the Report", "[agent][hang]") {
  AgentHarness h(Options());
  h.Joined(Gen(1, 1));
  std::vector<AgentAction> out = h.Receive(Query{7, "stacks"});
  REQUIRE(out.size() == 1);
  std::optional<DoQuery> q = Find<DoQuery>(out);
  REQUIRE(q);
  CHECK(q->id == 7);
  CHECK(q->what == "stacks");
  out = h.Take(h.m.Answer(7, {R"({"rank":2})", R"({"rank":3})"}));
  std::optional<Report> report = Sent<Report>(out);
  REQUIRE(report);
  CHECK(*report == Report{7, 1, {R"({"rank":2})", R"({"rank":3})"}});
  CHECK(h.m.state() == AgentMachine::State::kRunning);
}

TEST_CASE("agent: a Query with no workers running is answered at once, empty", "[agent][hang]") {
  AgentHarness h(Options());
  h.Joined(Gen(1, 1));
  h.Take(h.m.OnWorkersDone(0, h.now));
  REQUIRE(h.m.state() == AgentMachine::State::kBarrier);
  std::vector<AgentAction> out = h.Receive(Query{8, "stacks"});
  CHECK_FALSE(Find<DoQuery>(out));
  CHECK(Sent<Report>(out) == Report{8, 1, {}});
}

TEST_CASE("agent: an Answer too big for a frame is cut, and says so", "[agent][hang]") {
  AgentHarness h(Options());
  h.Joined(Gen(1, 0));
  std::vector<std::string> items(300, std::string(kMaxString, 'x'));  // 1.2 MB
  items[1] = std::string(kMaxString + 1, 'y');                        // over the string cap
  std::vector<AgentAction> out = h.Take(h.m.Answer(3, items));
  std::optional<Report> report = Sent<Report>(out);
  REQUIRE(report);
  CHECK(CheckEncodable(*report).ok());
  std::size_t kept = report->items.size();
  CHECK(kept == (kMaxPayload - 12) / (4 + kMaxString));
  std::optional<DoNotice> notice = Find<DoNotice>(out);
  REQUIRE(notice);
  CHECK(notice->line == fmt::format("rendezvous head:29400: left {} items out of the report for query 3 (over the "
                                    "frame's caps)",
                                    300 - kept));
}

TEST_CASE("agent: an Answer after the connection is gone is dropped", "[agent][hang]") {
  AgentHarness h(Options());
  h.Joined(Gen(1, 0));
  h.Receive(Query{1, "stacks"});
  h.Take(h.m.OnClosed(Status::PeerLost("connection closed"), h.now));
  CHECK(h.Take(h.m.Answer(1, {"{}"})).empty());
}

TEST_CASE("agent: a Query before the join is not a coordinator speaking", "[agent][hang]") {
  AgentHarness h(Options());
  h.Start();
  h.Connected();
  std::optional<DoFinish> f = Find<DoFinish>(h.Receive(Query{1, "stacks"}));
  REQUIRE(f);
  CHECK(
      f->error ==
      "rendezvous head:29400: the peer at head:29400 is not a dlaunch coordinator (it sent query before a challenge)");
}

}  // namespace dlaunch::rendezvous
