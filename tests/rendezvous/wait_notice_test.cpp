// When a rendezvous that is still waiting says so (WaitNotice), and what the
// coordinator and an agent then say.
#include "rendezvous/wait_notice.hpp"

#include <catch2/catch.hpp>

#include "tests/rendezvous/agent_harness.hpp"
#include "tests/rendezvous/coordinator_harness.hpp"

namespace dlaunch::rendezvous {

using namespace std::chrono_literals;
using Clock = WaitNotice::Clock;

TEST_CASE("wait notice: at 30 s, then each time the wait has doubled", "[wait_notice]") {
  WaitNotice n;
  const Clock::time_point t0{};
  CHECK_FALSE(n.Due(t0, t0 + 29999ms));
  CHECK(n.Due(t0, t0 + 30s));
  CHECK_FALSE(n.Due(t0, t0 + 30s));  // once
  CHECK_FALSE(n.Due(t0, t0 + 59s));
  CHECK(n.Due(t0, t0 + 60s));
  CHECK_FALSE(n.Due(t0, t0 + 119s));
  CHECK(n.Due(t0, t0 + 120s));
  // A tick long late (a stopped process) says it once; the next mark is past it.
  CHECK(n.Due(t0, t0 + 300s));
  CHECK_FALSE(n.Due(t0, t0 + 479s));
  CHECK(n.Due(t0, t0 + 480s));
  // A new wait starts over.
  CHECK_FALSE(n.Due(t0 + 1000s, t0 + 1029s));
  CHECK(n.Due(t0 + 1000s, t0 + 1030s));
}

namespace {

// Ticks at `since_t0`, every joined agent having beaten just before.
void BeatAndTick(testing::Harness& h, Clock::duration since_t0, const std::vector<ConnId>& conns) {
  h.now = h.t0 + since_t0;
  for (ConnId id : conns) h.Send(id, Heartbeat{});
  h.TickAt(since_t0);
}

}  // namespace

TEST_CASE("coordinator: a host still short of nodes says who is there now and then", "[wait_notice][coordinator]") {
  testing::Harness h(testing::Opts(3, 3));
  std::vector<ConnId> conns{h.JoinAs(testing::MakeJoin("a"))};
  h.now = h.t0 + 5s;
  conns.push_back(h.JoinAs(testing::MakeJoin("b")));
  const std::string at30 =
      "rendezvous head:29400: still waiting for 1 of 3 nodes after 30s (joined: a, b); the join timeout ends it in "
      "570s";
  for (auto t = 10s; t < 30s; t += 10s) BeatAndTick(h, t, conns);
  BeatAndTick(h, 29s, conns);
  CHECK_FALSE(h.HasLog(at30));
  BeatAndTick(h, 30s, conns);
  CHECK(h.HasLog(at30));
  size_t logs = h.logs.size();
  BeatAndTick(h, 40s, conns);
  BeatAndTick(h, 50s, conns);
  BeatAndTick(h, 59s, conns);
  CHECK(h.logs.size() == logs);
  BeatAndTick(h, 60s, conns);
  CHECK(
      h.HasLog("rendezvous head:29400: still waiting for 1 of 3 nodes after 60s (joined: a, b); the join timeout "
               "ends it in 540s"));
  CHECK(h.limits.back() == "waits");
  CHECK_FALSE(h.ended.has_value());
}

TEST_CASE("coordinator: no wait notice during a last call, or once the job runs", "[wait_notice][coordinator]") {
  testing::Harness h(testing::Opts(2, 3));
  std::vector<ConnId> conns{h.JoinAs(testing::MakeJoin("a"))};
  h.now = h.t0 + 10s;
  h.Send(conns[0], Heartbeat{});
  h.now = h.t0 + 20s;
  conns.push_back(h.JoinAs(testing::MakeJoin("b")));                // min reached: a last call of 30 s
  for (auto t = 25s; t <= 120s; t += 5s) BeatAndTick(h, t, conns);  // assigned at 50 s
  REQUIRE(h.AssignmentsOf(conns[0]).size() == 1);
  for (const std::string& line : h.logs) CHECK(line.find("still waiting") == std::string::npos);
  CHECK_FALSE(h.ended.has_value());
}

namespace {

agent_testing::AgentHarness LongWait(bool hosted = false) {
  AgentMachineOptions o = agent_testing::Options();
  o.join_timeout = 600s;
  o.hosted = hosted;
  return agent_testing::AgentHarness(o);
}

std::vector<std::string> Notices(const std::vector<AgentAction>& actions) {
  std::vector<std::string> out;
  for (const AgentAction& a : actions)
    if (auto* n = std::get_if<DoNotice>(&a)) out.push_back(n->line);
  return out;
}

}  // namespace

TEST_CASE("agent: one that cannot reach its coordinator says so now and then", "[wait_notice][agent]") {
  agent_testing::AgentHarness h = LongWait();
  h.Start();
  std::vector<std::string> said;
  // Refused at every try, retried at each deadline, for two minutes.
  while (h.now < h.t0 + 121s) {
    h.Take(h.m.OnConnectFailed("Connection refused", h.now));
    std::vector<AgentAction> out = h.TickAt(*h.m.NextDeadline() - h.t0);
    for (const std::string& line : Notices(out)) said.push_back(line);
  }
  REQUIRE(said.size() == 3);  // 30, 60 and 120 s
  CHECK(
      said[0].starts_with("rendezvous head:29400: no coordinator yet after 30s (last try: Connection refused); "
                          "trying until the join timeout, 5"));
  CHECK(said[1].starts_with("rendezvous head:29400: no coordinator yet after 60s"));
  CHECK(said[2].starts_with("rendezvous head:29400: no coordinator yet after 120s"));
}

TEST_CASE("agent: a joined agent says it waits for the other nodes, unless it hosts the coordinator",
          "[wait_notice][agent]") {
  for (bool hosted : {false, true}) {
    agent_testing::AgentHarness h = LongWait(hosted);
    h.Handshake(Challenge{});
    REQUIRE(h.m.state() == AgentMachine::State::kJoining);
    std::vector<std::string> said;
    for (auto t = 5s; t <= 35s; t += 5s) {
      h.Receive(Heartbeat{});
      for (const std::string& line : Notices(h.TickAt(t))) said.push_back(line);
    }
    if (hosted) {
      CHECK(said.empty());  // the coordinator beside it says who is missing
    } else {
      REQUIRE(said.size() == 1);
      CHECK(said[0] == "rendezvous head:29400: joined; still waiting after 30s for the other nodes");
    }
    // Assigned: nothing more, however long the job runs.
    h.Receive(agent_testing::Gen(1));
    size_t before = said.size();
    for (auto t = 40s; t <= 300s; t += 5s) {
      h.Receive(Heartbeat{});
      for (const std::string& line : Notices(h.TickAt(t))) said.push_back(line);
    }
    CHECK(said.size() == before);
  }
}

}  // namespace dlaunch::rendezvous
