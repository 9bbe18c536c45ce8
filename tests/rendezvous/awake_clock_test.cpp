// The awake clock alone, then the coordinator and an agent driven through it
// the way the server and the agent session drive them, across a pause of the
// whole job (a Slurm suspend): no peer is lost for the pause, and a peer that
// stays silent after it still is.
#include "rendezvous/awake_clock.hpp"

#include <catch2/catch.hpp>

#include "tests/rendezvous/agent_harness.hpp"
#include "tests/rendezvous/coordinator_harness.hpp"

namespace dlaunch::rendezvous {

using namespace std::chrono_literals;
using Clock = AwakeClock::Clock;

TEST_CASE("awake clock: real time while every wake-up comes on time", "[awake]") {
  AwakeClock clock;
  const Clock::time_point t0{};
  CHECK(clock.Now(t0) == t0);
  CHECK(clock.Arm(t0 + 50ms, t0) == t0 + 50ms);
  CHECK(clock.Now(t0 + 60ms) == t0 + 60ms);
  // Late by up to a second is a busy process, not a pause.
  clock.Arm(t0 + 100ms, t0 + 60ms);
  CHECK(clock.Now(t0 + 1100ms) == t0 + 1100ms);
  CHECK(clock.paused() == 0s);
  CHECK_FALSE(clock.resumed().has_value());
  CHECK(clock.CountFrom(t0 + 5ms) == t0 + 5ms);
}

TEST_CASE("awake clock: a wake-up long past its time takes the pause out, once", "[awake]") {
  AwakeClock clock;
  const Clock::time_point t0{};
  clock.Now(t0);
  clock.Arm(t0 + 50ms, t0);
  // Frozen at about t0 and resumed at t0 + 20 s: the clock stood still from the due time.
  CHECK(clock.Now(t0 + 20s) == t0 + 50ms);
  CHECK(clock.paused() == 20s - 50ms);
  CHECK(clock.resumed() == t0 + 20s);
  // A silence that began before the pause counts from the resume; a later one from its start.
  CHECK(clock.CountFrom(t0 + 1s) == t0 + 20s);
  CHECK(clock.CountFrom(t0 + 21s) == t0 + 21s);
  // Counted once: the next reading, before any new timer, goes on from there.
  CHECK(clock.Now(t0 + 20s + 10ms) == t0 + 60ms);
  // A deadline on this clock is armed in real time, after the pause.
  CHECK(clock.Arm(t0 + 110ms, t0 + 20s + 10ms) == t0 + 20s + 60ms);
  CHECK(clock.Now(t0 + 20s + 60ms) == t0 + 110ms);
  // A second pause adds up.
  CHECK(clock.Now(t0 + 30s + 60ms) == t0 + 110ms);
  CHECK(clock.paused() == 30s - 50ms);
}

TEST_CASE("awake clock: no timer armed, no pause seen; a due time already past counts from the arming", "[awake]") {
  AwakeClock clock;
  const Clock::time_point t0{};
  clock.Arm(t0 + 50ms, t0);
  clock.Disarm();
  // Nothing was due: an hour without a reading is an idle process.
  CHECK(clock.Now(t0 + 1h) == t0 + 1h);
  // A deadline 10 s past when it is armed fires at once; it is not 10 s late.
  CHECK(clock.Arm(t0 + 1h - 10s, t0 + 1h) == t0 + 1h - 10s);
  CHECK(clock.Now(t0 + 1h + 5ms) == t0 + 1h + 5ms);
  CHECK(clock.paused() == 0s);
}

namespace {

// The server's loop: a tick every 50 ms of real time, each given the awake time.
struct Server {
  testing::Harness h{[] {
    CoordinatorOptions o = testing::Opts(3, 3);
    o.heartbeat_timeout = 15s;
    return o;
  }()};
  AwakeClock clock;
  Clock::time_point real = h.t0;

  void Read() { h.now = clock.Now(real); }
  // Ticks every 50 ms until `until` (real time); `beat` beats before each tick.
  void Serve(Clock::time_point until, const std::vector<ConnId>& beat = {}) {
    while (real < until && !h.ended) {
      real += 50ms;
      Read();
      for (ConnId id : beat) h.Send(id, Heartbeat{});
      h.Apply(h.c.OnTick(h.now));
      clock.Arm(h.now + 50ms, real);
    }
  }
};

}  // namespace

TEST_CASE("coordinator on the awake clock: a frozen job loses nobody; a node silent after the resume is lost",
          "[awake][coordinator]") {
  Server s;
  s.Read();
  std::vector<ConnId> conns;
  for (const char* host : {"a", "b", "c"}) conns.push_back(s.h.JoinAs(testing::MakeJoin(host)));
  s.clock.Arm(s.h.now + 50ms, s.real);
  s.Serve(s.h.t0 + 10s, conns);
  // The whole job stops for 60 s: no beat comes, and none waits unread.
  s.real += 60s;
  s.Serve(s.real + 14s, {conns[0], conns[1]});
  CHECK_FALSE(s.h.ended.has_value());
  CHECK(s.h.closed.empty());
  // c beat last at about 10 s before the pause: 15 s awake after that, it is lost.
  s.Serve(s.real + 2s, {conns[0], conns[1]});
  REQUIRE(s.h.ended.has_value());
  CHECK(s.h.closed.at(conns[2]) == "no heartbeat for 15s");
  CHECK(s.real - s.h.t0 >= 60s + 10s + 15s);
  CHECK(s.real - s.h.t0 < 60s + 10s + 15s + 200ms);
}

TEST_CASE("the same coordinator on real time ends the job at the resume", "[awake][coordinator]") {
  // What the clock is for: the server before it handed the coordinator real time.
  testing::Harness h(testing::Opts(3, 3));
  std::vector<ConnId> conns;
  for (const char* host : {"a", "b", "c"}) conns.push_back(h.JoinAs(testing::MakeJoin(host)));
  h.TickAt(10s);
  for (ConnId id : conns) h.Send(id, Heartbeat{});
  h.TickAt(70s + 50ms);
  CHECK(h.ended.has_value());
}

TEST_CASE("agent on the awake clock: a frozen job does not lose its coordinator", "[awake][agent]") {
  agent_testing::AgentHarness h(agent_testing::Options());
  AwakeClock clock;
  Clock::time_point real = h.t0;
  h.now = clock.Now(real);
  h.Joined(agent_testing::Gen(1));
  // The session's loop: wake at the machine's next deadline, through the clock.
  auto wake = [&](Clock::time_point at) {
    real = at;
    h.now = clock.Now(real);
    return h.Take(h.m.OnTick(h.now));
  };
  for (int i = 0; i < 3; ++i) {
    real = clock.Arm(*h.m.NextDeadline(), real);
    wake(real);
    h.Receive(Heartbeat{});  // answered
  }
  size_t beats = h.Heartbeats();
  // Frozen for a minute; the first wake-up after it comes long past its time.
  Clock::time_point due = clock.Arm(*h.m.NextDeadline(), real);
  std::vector<AgentAction> out = wake(due + 60s);
  CHECK_FALSE(agent_testing::Find<DoStopWorkers>(out));
  CHECK(h.Heartbeats() == beats + 1);  // it beats at once
  // Nothing heard from then on: lost after 15 s of awake silence, 5 of them
  // before the pause (its last wake-up was a heartbeat period after the answer).
  Clock::time_point resumed = real;
  while (!agent_testing::Find<DoStopWorkers>(out) && real < resumed + 30s)
    out = wake(clock.Arm(*h.m.NextDeadline(), real));
  REQUIRE(agent_testing::Find<DoStopWorkers>(out));
  CHECK(real - resumed >= 10s);
  CHECK(real - resumed <= 10s + 1ms);
}

}  // namespace dlaunch::rendezvous
