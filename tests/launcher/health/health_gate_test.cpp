#include "launcher/health/health_gate.hpp"

#include <csignal>
#include <string>
#include <vector>

#include <boost/json/serialize.hpp>
#include <catch2/catch.hpp>

#include "tests/launcher/health/fakes.hpp"

using dlaunch::launcher::EventLog;
using dlaunch::launcher::HealthGate;
using dlaunch::launcher::HealthGateOptions;
using dlaunch::launcher::SteadyTime;
using dlaunch::testing::FakeChecker;
using dlaunch::testing::FakeSignals;
using dlaunch::testing::FakeTimers;
using std::chrono::seconds;

namespace {

// A gate on fakes, with what it said, the events it wrote and its verdicts.
struct GateRig {
  GateRig() {
    events.Observe([this](std::string_view name, const boost::json::object& f) {
      if (name == "health_check") checks.push_back(boost::json::serialize(f));
    });
  }
  ~GateRig() { events.Observe(nullptr); }

  void Admit(seconds join_timeout) {
    gate.Admit(
        timers.Now() + join_timeout, [this] { ++admitted; }, [this](const std::string& line) { given_up = line; });
  }

  FakeTimers timers;
  FakeSignals signals;
  FakeChecker checker;
  EventLog events;
  std::vector<std::string> lines;
  std::vector<std::string> checks;  // health_check events' fields
  std::vector<int> stopped;
  int admitted = 0;
  std::string given_up;
  HealthGate gate{timers,
                  signals,
                  checker,
                  HealthGateOptions{"df -P /scratch", seconds(300), {SIGTERM, SIGINT}},
                  &events,
                  HealthGate::Hooks{[this](const std::string& line) { lines.push_back(line); },
                                    [this](int sig) { stopped.push_back(sig); }}};
};

}  // namespace

TEST_CASE("a node whose first check passes joins at once, without a word", "[health]") {
  GateRig g;
  g.Admit(seconds(600));
  REQUIRE(g.checker.runs == 1);
  CHECK(g.admitted == 0);
  CHECK(g.signals.watches() == 1);  // a stop signal ends the check
  g.checker.Pass();
  CHECK(g.admitted == 1);
  CHECK(g.lines.empty());
  CHECK_FALSE(g.gate.held_out());
  CHECK(g.signals.watches() == 0);  // the signals go back once joined
  CHECK_FALSE(g.timers.NextDue());
  REQUIRE(g.checks.size() == 1);
  CHECK(g.checks[0].find(R"("ok":true)") != std::string::npos);
}

TEST_CASE("a failing node is held out, checks again each interval, and joins once a check passes", "[health]") {
  GateRig g;
  g.Admit(seconds(3600));
  g.checker.Fail("exited with code 3", "no space on /scratch");
  CHECK(g.admitted == 0);
  CHECK(g.gate.held_out());
  REQUIRE(g.lines.size() == 1);
  CHECK(g.lines[0] ==
        "health check 'df -P /scratch': exited with code 3: no space on /scratch (this node is held out of the job; "
        "next check in 300s)");
  REQUIRE(g.checks.size() == 1);
  CHECK(g.checks[0].find(R"("ok":false)") != std::string::npos);
  CHECK(g.checks[0].find(R"("last_line":"no space on /scratch")") != std::string::npos);
  // Nothing runs until the interval has passed: no busy loop.
  g.timers.Advance(seconds(299));
  CHECK(g.checker.runs == 1);
  g.timers.Advance(seconds(1));
  CHECK(g.checker.runs == 2);
  g.checker.Fail("did not finish within 60s; killed", "");
  CHECK(g.lines.back() ==
        "health check 'df -P /scratch': did not finish within 60s; killed (this node is held out of the job; next "
        "check in 300s)");
  g.timers.Advance(seconds(300));
  REQUIRE(g.checker.runs == 3);
  g.checker.Pass();
  CHECK(g.admitted == 1);
  CHECK(g.lines.back() == "health check 'df -P /scratch': passed; this node joins the job");
  CHECK_FALSE(g.gate.held_out());
  CHECK(g.given_up.empty());
  CHECK(g.checks.size() == 3);
  CHECK(g.signals.watches() == 0);
}

TEST_CASE("a node that never passes ends when its join timeout from the start runs out", "[health]") {
  GateRig g;
  SteadyTime start = g.timers.Now();
  g.Admit(seconds(600));
  g.checker.Fail("exited with code 1", "GPU 3 missing");
  g.timers.Advance(seconds(300));
  REQUIRE(g.checker.runs == 2);
  g.checker.Fail("exited with code 1", "GPU 3 missing");
  // The next check would come at the deadline: the line says when it ends.
  CHECK(g.lines.back() ==
        "health check 'df -P /scratch': exited with code 1: GPU 3 missing (this node is held out of the job; its "
        "join timeout ends it in 300s)");
  g.timers.Advance(seconds(299));
  CHECK(g.given_up.empty());
  g.timers.Advance(seconds(1));
  CHECK(g.timers.Now() == start + seconds(600));
  CHECK(g.given_up ==
        "health check 'df -P /scratch': kept this node out of the job until its join timeout ran out (600s of "
        "waiting); last check: exited with code 1: GPU 3 missing");
  CHECK(g.admitted == 0);
  CHECK(g.checker.runs == 2);
  CHECK(g.signals.watches() == 0);
  CHECK_FALSE(g.timers.NextDue());
}

TEST_CASE("a stop signal while held out or checking kills the check and ends the node at once", "[health]") {
  GateRig g;
  g.Admit(seconds(600));
  REQUIRE(g.checker.running());
  CHECK(g.signals.Raise(SIGTERM) == 1);
  CHECK(g.checker.cancels == 1);  // the check's group is killed
  CHECK(g.stopped == std::vector<int>{SIGTERM});
  CHECK(g.signals.watches() == 0);
  CHECK_FALSE(g.timers.NextDue());

  GateRig held;
  held.Admit(seconds(600));
  held.checker.Fail("exited with code 3", "");
  REQUIRE(held.timers.NextDue());
  CHECK(held.signals.Raise(SIGINT) == 1);
  CHECK(held.stopped == std::vector<int>{SIGINT});
  CHECK_FALSE(held.timers.NextDue());  // no check comes after
  held.timers.Advance(seconds(900));
  CHECK(held.checker.runs == 1);
  CHECK(held.given_up.empty());
}

TEST_CASE("before a restart a stale pass is checked again; a failure takes the node out", "[health]") {
  GateRig g;
  g.Admit(seconds(600));
  g.checker.Pass();
  CHECK_FALSE(g.gate.Due());
  g.timers.Advance(seconds(299));
  CHECK_FALSE(g.gate.Due());  // fresh: a restart now runs no check
  g.timers.Advance(seconds(1));
  CHECK(g.gate.Due());

  std::vector<bool> rechecked;
  g.gate.Recheck([&](bool ok) { rechecked.push_back(ok); });
  REQUIRE(g.checker.runs == 2);
  g.checker.Pass();
  CHECK(rechecked == std::vector<bool>{true});
  CHECK_FALSE(g.gate.Due());
  CHECK(g.signals.watches() == 0);

  g.timers.Advance(seconds(400));
  g.gate.Recheck([&](bool ok) { rechecked.push_back(ok); });
  g.checker.Fail("exited with code 2", "ib0 down");
  CHECK(rechecked == std::vector<bool>{true, false});
  CHECK(g.lines.back() ==
        "health check 'df -P /scratch': exited with code 2: ib0 down (before the restart; this node leaves the job "
        "and is held out)");
  // Held out from that failure: no check at once, the next one an interval after it.
  SteadyTime failed = g.timers.Now();
  g.Admit(seconds(600));
  CHECK(g.checker.runs == 3);
  CHECK(g.timers.NextDue() == failed + seconds(300));
  g.timers.Advance(seconds(300));
  REQUIRE(g.checker.runs == 4);
  g.checker.Pass();
  CHECK(g.admitted == 2);
}

namespace {

// A node joined on a passing check (at the rig's time) whose gate keeps its check fresh.
struct WaitingRig : GateRig {
  WaitingRig() {
    Admit(seconds(600));
    checker.Pass();
    joined_at = timers.Now();
    gate.KeepFresh([this] { return waiting; }, [this] { ++failed; });
  }
  bool waiting = true;
  int failed = 0;
  SteadyTime joined_at;
};

}  // namespace

TEST_CASE("a node that waits joined checks every interval, staying joined while it passes", "[health]") {
  WaitingRig g;
  CHECK(g.timers.NextDue() == g.joined_at + seconds(300));
  g.timers.Advance(seconds(299));
  CHECK(g.checker.runs == 1);
  g.timers.Advance(seconds(1));
  REQUIRE(g.checker.runs == 2);     // the pass turned an interval old while it waited
  CHECK(g.signals.watches() == 1);  // a stop signal ends the check, and the node
  g.checker.Pass();
  CHECK(g.failed == 0);
  CHECK(g.lines.empty());
  CHECK(g.signals.watches() == 0);
  CHECK_FALSE(g.gate.Due());  // promoted now, it would run at once
  CHECK(g.checks.size() == 2);
  g.timers.Advance(seconds(300));
  REQUIRE(g.checker.runs == 3);
  g.checker.Pass();
  g.timers.Advance(seconds(300) - std::chrono::milliseconds(1));
  CHECK(g.checker.runs == 3);
  CHECK_FALSE(g.gate.Due());
}

TEST_CASE("a node that runs workers is not checked; once it waits with a stale pass it checks within a second",
          "[health]") {
  WaitingRig g;
  g.waiting = false;
  g.timers.Advance(seconds(3600));
  CHECK(g.checker.runs == 1);
  CHECK(g.gate.Due());
  g.waiting = true;  // standing by after a lost node
  g.timers.Advance(seconds(1));
  REQUIRE(g.checker.runs == 2);
  g.checker.Pass();
  CHECK_FALSE(g.gate.Due());
}

TEST_CASE("a check that fails while the node waits takes it out of the job and holds it out", "[health]") {
  WaitingRig g;
  g.timers.Advance(seconds(300));
  REQUIRE(g.checker.runs == 2);
  g.checker.Fail("exited with code 4", "ib0 down");
  CHECK(g.failed == 1);
  CHECK(g.gate.held_out());
  CHECK(g.lines == std::vector<std::string>{
                       "health check 'df -P /scratch': exited with code 4: ib0 down (while this node waited; it "
                       "leaves the job and is held out)"});
  REQUIRE(g.checks.size() == 2);
  CHECK(g.checks[1].find(R"("ok":false)") != std::string::npos);
  // The owner left and asks to rejoin: the next check an interval after the failure.
  SteadyTime failed = g.timers.Now();
  g.Admit(seconds(600));
  CHECK(g.checker.runs == 2);
  CHECK(g.timers.NextDue() == failed + seconds(300));
  g.timers.Advance(seconds(300));
  REQUIRE(g.checker.runs == 3);
  g.checker.Pass();
  CHECK(g.admitted == 2);
  CHECK(g.failed == 1);
  // The watch ended with the failure: nothing more until the owner keeps it fresh again.
  CHECK_FALSE(g.timers.NextDue());
}

TEST_CASE("a restart while a waiting node checks takes that check's verdict", "[health]") {
  WaitingRig g;
  g.timers.Advance(seconds(300));
  REQUIRE(g.checker.runs == 2);
  g.waiting = false;  // promoted: its assignment came
  REQUIRE(g.gate.Due());
  std::vector<bool> rechecked;
  g.gate.Recheck([&](bool ok) { rechecked.push_back(ok); });
  CHECK(g.checker.runs == 2);  // no second check
  g.checker.Pass();
  CHECK(rechecked == std::vector<bool>{true});
  CHECK(g.failed == 0);
  // Its workers run: the watch goes on, but checks only once the node waits again.
  g.timers.Advance(seconds(600));
  CHECK(g.checker.runs == 2);

  WaitingRig h;
  h.timers.Advance(seconds(300));
  h.waiting = false;
  std::vector<bool> verdicts;
  h.gate.Recheck([&](bool ok) { verdicts.push_back(ok); });
  h.checker.Fail("exited with code 2", "");
  CHECK(verdicts == std::vector<bool>{false});
  CHECK(h.failed == 0);  // the restart's failure, said as such
  REQUIRE(h.lines.size() == 1);
  CHECK(h.lines[0].ends_with("(before the restart; this node leaves the job and is held out)"));
}

TEST_CASE("a stop signal while a waiting node checks ends it; Stop ends the watch", "[health]") {
  WaitingRig g;
  g.timers.Advance(seconds(300));
  REQUIRE(g.checker.running());
  CHECK(g.signals.Raise(SIGTERM) == 1);
  CHECK(g.checker.cancels == 1);
  CHECK(g.stopped == std::vector<int>{SIGTERM});
  CHECK_FALSE(g.timers.NextDue());

  WaitingRig h;
  h.gate.Stop();
  CHECK_FALSE(h.timers.NextDue());
  h.timers.Advance(seconds(3600));
  CHECK(h.checker.runs == 1);
}
