#include "rendezvous/agent_machine.hpp"

#include <catch2/catch.hpp>

#include "rendezvous/auth.hpp"
#include "rendezvous/retry_grid.hpp"
#include "tests/rendezvous/agent_harness.hpp"

namespace dlaunch::rendezvous {

using namespace agent_testing;
using namespace std::chrono_literals;

TEST_CASE("agent: start connects; a refused connect is tried again at each tick of the job's grid", "[agent]") {
  AgentMachineOptions o = Options();
  o.min_nodes = o.max_nodes = 1024;  // a tick every RetryPeriod(1024), 256ms
  o.join_timeout = 60s;
  AgentHarness h(o);
  REQUIRE(Find<DoConnect>(h.Start()));
  std::vector<Clock::duration> pauses;
  for (int i = 0; i < 5; ++i) {
    REQUIRE(h.Take(h.m.OnConnectFailed("Connection refused", h.now)).empty());
    REQUIRE(h.m.state() == AgentMachine::State::kBackoff);
    Clock::time_point retry = *h.m.NextDeadline();
    pauses.push_back(retry - h.now);
    // Nothing happens before the tick: no spinning.
    CHECK(h.TickAt(retry - h.t0 - 1ms).empty());
    REQUIRE(Find<DoConnect>(h.TickAt(retry - h.t0)));
  }
  // t0 is 30ms into a tick of 256ms (kWallAtT0): the rest of it, then whole ticks.
  CHECK(pauses == std::vector<Clock::duration>{226ms, 256ms, 256ms, 256ms, 256ms});
}

TEST_CASE("agent: agents that start apart try again at the same moments", "[agent]") {
  // The job waits for the last agent to notice its host: on a shared grid that
  // is one spread after the first, not nearly a whole pause.
  AgentMachineOptions o = Options();
  o.min_nodes = o.max_nodes = 1024;
  AgentHarness first(o), second(o);
  first.Start();
  second.now = second.t0 + 97ms;  // the second starts 97ms later
  second.Start();
  first.Take(first.m.OnConnectFailed("Connection refused", first.now));
  second.Take(second.m.OnConnectFailed("Connection refused", second.now));
  CHECK(*first.m.NextDeadline() == *second.m.NextDeadline());
  CHECK(*first.m.NextDeadline() - first.t0 == 226ms);
}

TEST_CASE("agent: a small job tries every 25ms, and every 100ms once it has waited 2s", "[agent]") {
  // A small job's whole start is a few tens of milliseconds: what it waits for
  // is the tick after its host came up. A long wait costs an agent less.
  AgentMachineOptions o = Options();
  o.min_nodes = o.max_nodes = 64;
  o.join_timeout = 60s;
  AgentHarness h(o);
  REQUIRE(Find<DoConnect>(h.Start()));
  std::vector<Clock::duration> pauses;
  while (h.now - h.t0 < 2300ms) {
    REQUIRE(h.Take(h.m.OnConnectFailed("Connection refused", h.now)).empty());
    Clock::time_point retry = *h.m.NextDeadline();
    pauses.push_back(retry - h.now);
    REQUIRE(Find<DoConnect>(h.TickAt(retry - h.t0)));
  }
  // t0 is 30ms into a tick of 100ms (kWallAtT0), 5ms into one of 25ms: to
  // the next, then 25ms until 2s have passed, then from 2,020ms (2,050ms on
  // the wall's ticks) to the next tick of 100ms, and whole ones.
  std::vector<Clock::duration> want{20ms};
  want.insert(want.end(), 80, 25ms);
  want.insert(want.end(), {50ms, 100ms, 100ms, 100ms});
  CHECK(pauses == want);
}

TEST_CASE("agent: a host that comes up late is reached within one tick and its spread", "[agent]") {
  // At scale agents start before their host, and the job waits for the last
  // of them to notice it: the pause must stay short however long it waited.
  AgentMachineOptions o = Options();
  o.min_nodes = o.max_nodes = 1024;
  o.join_timeout = 60s;
  o.random = [] { return 0.999; };  // as late in the spread as a try comes
  RetryGrid grid = GridFor(RetryPeriod(1024), 1024);
  AgentHarness h(o);
  REQUIRE(Find<DoConnect>(h.Start()));
  int attempts = 1;
  Clock::time_point host_up = h.t0 + 10s;
  while (h.now < host_up) {
    REQUIRE(h.Take(h.m.OnConnectFailed("Connection refused", h.now)).empty());
    Clock::time_point retry = *h.m.NextDeadline();
    CHECK(retry - h.now <= grid.period + grid.spread);
    REQUIRE(Find<DoConnect>(h.TickAt(retry - h.t0)));
    ++attempts;
  }
  CHECK(h.now - host_up < grid.period + grid.spread);
  // A thousand agents waiting ten seconds: one attempt each a tick.
  CHECK(attempts <= 10s / grid.period + 2);
  h.Take(h.m.OnConnected("127.0.0.1", h.now));
  CHECK(h.m.state() == AgentMachine::State::kHandshake);
}

TEST_CASE("agent: a try comes up to the spread late at random", "[agent]") {
  AgentMachineOptions o = Options();
  o.random = [] { return 0.5; };
  AgentHarness h(o);
  h.Start();
  h.Take(h.m.OnConnectFailed("Connection refused", h.now));
  // Two nodes: a tick every 25ms, spread over 2ms; t0 is 5ms into a tick.
  CHECK(*h.m.NextDeadline() - h.now == 21ms);
}

TEST_CASE("agent: gives up connecting after the join timeout, naming the endpoint and the last error", "[agent]") {
  AgentHarness h(Options());
  h.Start();
  for (int i = 0; i < 1000 && h.m.state() != AgentMachine::State::kEnded; ++i) {
    h.Take(h.m.OnConnectFailed("Connection refused", h.now));
    if (auto next = h.m.NextDeadline()) h.TickAt(*next - h.t0);
  }
  std::optional<DoFinish> f = Find<DoFinish>(h.all);
  REQUIRE(f);
  CHECK(f->code == 1);
  CHECK(f->error == "rendezvous head:29400: cannot connect within 5s (Connection refused)");
  CHECK(h.now - h.t0 == 5s);  // the last pause ends at the join timeout, not past it
}

TEST_CASE("agent: a name that does not resolve is said at once, then retried quietly until the join timeout",
          "[agent]") {
  AgentHarness h(Options());
  h.Start();
  const std::string why = "cannot resolve head (Name or service not known; looked up through nsswitch.conf: files dns)";
  std::vector<AgentAction> first = h.Take(h.m.OnUnresolved(why, h.now));
  std::optional<DoNotice> notice = Find<DoNotice>(first);
  REQUIRE(notice);
  CHECK(notice->line == "rendezvous head:29400: " + why + "; retrying until the join timeout (5s)");
  CHECK(h.m.state() == AgentMachine::State::kBackoff);
  int notices = 0;
  for (int i = 0; i < 1000 && h.m.state() != AgentMachine::State::kEnded; ++i) {
    if (auto next = h.m.NextDeadline()) h.TickAt(*next - h.t0);
    if (h.m.state() == AgentMachine::State::kConnecting) {
      for (const AgentAction& a : h.Take(h.m.OnUnresolved(why, h.now)))
        if (std::holds_alternative<DoNotice>(a)) ++notices;
    }
  }
  CHECK(notices == 0);  // said once, not at every retry
  std::optional<DoFinish> f = Find<DoFinish>(h.all);
  REQUIRE(f);
  CHECK(f->error == "rendezvous head:29400: cannot connect within 5s (" + why + ")");
}

TEST_CASE("agent: a try the join timeout cuts short gives up with what the try before it met", "[agent]") {
  // With a name, each try looks it up again; a lookup still in flight at the
  // join timeout has not waited the handshake timeout, and says nothing new.
  AgentHarness h(Options());
  h.Start();
  const std::string why = "cannot resolve head (Name or service not known; looked up in /etc/hosts and DNS)";
  h.Take(h.m.OnUnresolved(why, h.now));
  for (int i = 0; i < 1000 && h.m.state() != AgentMachine::State::kEnded; ++i) {
    if (auto next = h.m.NextDeadline()) h.TickAt(*next - h.t0);
    // Every lookup fails but the last, at 4,970ms, which the join timeout
    // finds in flight.
    if (h.m.state() == AgentMachine::State::kConnecting && h.now - h.t0 < 4900ms) h.Take(h.m.OnUnresolved(why, h.now));
  }
  REQUIRE(h.m.state() == AgentMachine::State::kEnded);
  std::optional<DoFinish> f = Find<DoFinish>(h.all);
  REQUIRE(f);
  CHECK(h.now - h.t0 == 5s);
  CHECK(f->error == "rendezvous head:29400: cannot connect within 5s (" + why + ")");
}

TEST_CASE("agent: a connect in flight for the whole join timeout gives up as timed out", "[agent]") {
  // It has not waited the handshake timeout (10s) either.
  AgentHarness h(Options());
  REQUIRE(Find<DoConnect>(h.Start()));
  h.TickAt(5s);  // a black hole, and no try before it
  std::optional<DoFinish> f = Find<DoFinish>(h.all);
  REQUIRE(f);
  CHECK(f->error == "rendezvous head:29400: cannot connect within 5s (timed out)");
}

TEST_CASE("agent: a node that could not host its own endpoint says why once its second connect fails", "[agent]") {
  // Counts the notices among `actions`, and keeps the last.
  auto notices = [](const std::vector<AgentAction>& actions, std::string* line) {
    int n = 0;
    for (const AgentAction& a : actions)
      if (const auto* notice = std::get_if<DoNotice>(&a)) {
        ++n;
        *line = notice->line;
      }
    return n;
  };
  const std::string why_not = "--rdzv-endpoint head:29400: cannot bind (Address already in use)";
  for (bool tried : {true, false}) {
    CAPTURE(tried);
    AgentMachineOptions o = Options();
    if (tried) o.not_hosting = why_not;
    AgentHarness h(o);
    h.Start();
    std::string line;
    // The first refusal: a coordinator another agent here is starting may
    // not be listening yet.
    CHECK(notices(h.Take(h.m.OnConnectFailed("Connection refused", h.now)), &line) == 0);
    int said = 0;
    for (int i = 0; i < 1000 && h.m.state() != AgentMachine::State::kEnded; ++i) {
      if (auto next = h.m.NextDeadline()) h.TickAt(*next - h.t0);
      if (h.m.state() == AgentMachine::State::kConnecting)
        said += notices(h.Take(h.m.OnConnectFailed("Connection refused", h.now)), &line);
    }
    CHECK(said == (tried ? 1 : 0));
    if (tried)
      CHECK(line == "rendezvous head:29400: this machine could not host it (" + why_not +
                        "), and no coordinator answers there (Connection refused); retrying until the join timeout "
                        "(5s)");
    REQUIRE(Find<DoFinish>(h.all));
    CHECK(Find<DoFinish>(h.all)->code == 1);
  }
}

TEST_CASE("agent: a connect that hangs (a black hole) is abandoned at the handshake timeout", "[agent]") {
  AgentMachineOptions o = Options();
  o.join_timeout = 60s;
  AgentHarness h(o);
  h.Start();
  CHECK(h.TickAt(9s).empty());
  std::vector<AgentAction> out = h.TickAt(10s);
  CHECK(Find<DoHangUp>(out));
  CHECK(h.m.state() == AgentMachine::State::kBackoff);
}

TEST_CASE("agent: Hello carries the run id, the nonce and the job's size", "[agent]") {
  AgentHarness h(Options("tok"));
  h.Start();
  std::optional<Hello> hello = Sent<Hello>(h.Connected());
  REQUIRE(hello);
  CHECK(*hello == Hello{kProtocolVersion, "job42", kNonceA, 2, 2, 0});
}

TEST_CASE("agent: no heartbeat before the join, so a coordinator that reads the hello late still accepts it",
          "[agent]") {
  // Finding 5: the host was stopped for 7 s while this node connected.
  AgentHarness h(Options());
  h.Start();
  h.Connected();
  for (auto t : {2s, 5s, 7s}) CHECK(h.TickAt(t).empty());
  CHECK(h.Heartbeats() == 0);
  std::vector<AgentAction> out = h.Receive(Challenge{});
  std::optional<Join> join = Sent<Join>(out);
  REQUIRE(join);
  CHECK(join->addrs == std::vector<std::string>{"10.0.0.2"});
  CHECK(h.m.state() == AgentMachine::State::kJoining);
  // Heartbeats start with the join, every interval.
  CHECK(h.TickAt(11s).empty());
  CHECK(Sent<Heartbeat>(h.TickAt(12s)));
  CHECK(Sent<Heartbeat>(h.TickAt(17s)));
}

TEST_CASE("agent: a silent peer is left at the handshake timeout with one notice, and tried again", "[agent]") {
  AgentMachineOptions o = Options();
  o.join_timeout = 60s;
  AgentHarness h(o);
  h.Start();
  h.Connected();
  std::vector<AgentAction> out = h.TickAt(10s);
  CHECK(Find<DoHangUp>(out));
  std::optional<DoNotice> notice = Find<DoNotice>(out);
  REQUIRE(notice);
  CHECK(notice->line ==
        "rendezvous head:29400: no answer to hello within 10.0s (not a dlaunch coordinator, or a stopped one?); "
        "trying again until the join timeout");
  REQUIRE(Find<DoConnect>(h.TickAt(10s + 100ms)));
  h.Connected();
  CHECK_FALSE(Find<DoNotice>(h.TickAt(20s + 100ms)));  // said once
}

TEST_CASE("agent: a peer that speaks another protocol ends the agent at once", "[agent]") {
  AgentHarness h(Options());
  h.Start();
  h.Connected();
  std::vector<AgentAction> out =
      h.Take(h.m.OnClosed(Status::InvalidArgument("frame: bad magic 0x48545450 (expected 0x444c5256)"), h.now));
  std::optional<DoFinish> f = Find<DoFinish>(out);
  REQUIRE(f);
  CHECK(f->error ==
        "rendezvous head:29400: the peer at head:29400 is not a dlaunch coordinator "
        "(frame: bad magic 0x48545450 (expected 0x444c5256))");
}

TEST_CASE("agent: a coordinator of another protocol version is named as such, both versions given", "[agent]") {
  AgentHarness h(Options());
  h.Start();
  h.Connected();
  // What the codec says of the coordinator's first frame when its version is 6.
  FrameDecoder decoder;
  decoder.Feed(std::string("DLRV\x06\x02", 6));
  Result<std::optional<Message>> got = decoder.Next();
  REQUIRE_FALSE(got.ok());
  std::vector<AgentAction> out = h.Take(h.m.OnClosed(got.status(), h.now));
  std::optional<DoFinish> f = Find<DoFinish>(out);
  REQUIRE(f);
  CHECK(f->error ==
        "rendezvous head:29400: the coordinator at head:29400 speaks another rendezvous protocol "
        "(frame: unsupported version 6 (expected 5)); run one dlaunch version on every node "
        "(dlaunch --version)");
}

TEST_CASE("agent: with a token, the coordinator must prove it first", "[agent]") {
  auto finish_of = [](const Challenge& c) {
    AgentHarness h(Options("tok"));
    std::optional<DoFinish> f = Find<DoFinish>(h.Handshake(c));
    CHECK_FALSE(Sent<Proof>(h.all));
    CHECK_FALSE(Sent<Join>(h.all));
    return f ? f->error : std::string("(no finish)");
  };
  const std::string prefix = "rendezvous head:29400: the coordinator did not prove it holds the token ";
  CHECK(finish_of(Challenge{}) == prefix + "(it sent no challenge)");
  CHECK(finish_of(Challenge{"short", ""}) == prefix + "(challenge nonce of 5 bytes (expected 32))");
  const std::string mismatch = prefix + "(its proof does not match this agent's token)";
  CHECK(finish_of(Challenge{kNonceC, ProofFor("guess", Prover::kCoordinator, kNonceA, kNonceC, "job42")}) == mismatch);
  // The agent's own proof reflected back, and one bound to another job, are refused too.
  CHECK(finish_of(Challenge{kNonceC, ProofFor("tok", Prover::kAgent, kNonceA, kNonceC, "job42")}) == mismatch);
  CHECK(finish_of(Challenge{kNonceC, ProofFor("tok", Prover::kCoordinator, kNonceA, kNonceC, "job43")}) == mismatch);
}

TEST_CASE("agent: a token the user did not give is named when the proof fails", "[agent]") {
  AgentMachineOptions o = Options("tok");
  o.token_from = "its user's loopback token (/tmp/dlaunch-0/rdzv-token)";
  AgentHarness h(o);
  std::optional<DoFinish> f = Find<DoFinish>(
      h.Handshake(Challenge{kNonceC, ProofFor("job's", Prover::kCoordinator, kNonceA, kNonceC, "job42")}));
  REQUIRE(f);
  CHECK(f->error ==
        "rendezvous head:29400: the coordinator did not prove it holds the token (its proof does not "
        "match this agent's token); given no token, this agent used its user's loopback token "
        "(/tmp/dlaunch-0/rdzv-token): give it the job's token (DLAUNCH_RDZV_TOKEN, --rdzv-token or "
        "--rdzv-token-file)");
}

TEST_CASE("agent: a coordinator that proves the token gets the agent's proof and join", "[agent]") {
  AgentHarness h(Options("tok"));
  std::vector<AgentAction> out =
      h.Handshake(Challenge{kNonceC, ProofFor("tok", Prover::kCoordinator, kNonceA, kNonceC, "job42")});
  std::optional<Proof> proof = Sent<Proof>(out);
  REQUIRE(proof);
  CHECK(Verify("tok", Prover::kAgent, kNonceA, kNonceC, "job42", proof->mac));
  CHECK(Sent<Join>(out));
  CHECK(h.m.state() == AgentMachine::State::kJoining);
}

TEST_CASE("agent: an assignment before any challenge is not from a dlaunch coordinator", "[agent]") {
  AgentHarness h(Options("tok"));
  h.Start();
  h.Connected();
  std::optional<DoFinish> f = Find<DoFinish>(h.Receive(Gen(1)));
  REQUIRE(f);
  CHECK(f->error ==
        "rendezvous head:29400: the peer at head:29400 is not a dlaunch coordinator (it sent "
        "assignment before a challenge)");
  CHECK_FALSE(Find<DoRunWorkers>(h.all));
}

TEST_CASE("agent: a run id the wire cannot carry whole ends the agent before it connects", "[agent]") {
  AgentMachineOptions o = Options();
  o.join.run_id = std::string(kMaxString + 1, 'x');
  AgentHarness h(o);
  std::vector<AgentAction> out = h.Start();
  CHECK_FALSE(Find<DoConnect>(out));
  std::optional<DoFinish> f = Find<DoFinish>(out);
  REQUIRE(f);
  CHECK(f->code == 2);
  CHECK(f->error.starts_with("rendezvous head:29400: frame: string 'run_id' of hello is 4097 bytes"));
}

TEST_CASE("agent: without a token, a coordinator that wants one is refused", "[agent]") {
  AgentHarness h(Options());
  std::optional<DoFinish> f = Find<DoFinish>(h.Handshake(Challenge{kNonceC, ""}));
  REQUIRE(f);
  CHECK(f->error ==
        "rendezvous head:29400: the coordinator wants a token (--rdzv-token, DLAUNCH_RDZV_TOKEN or "
        "--rdzv-token-file)");
}

TEST_CASE("agent: a refusal or an abort before the assignment ends the join with its reason", "[agent]") {
  {
    AgentHarness h(Options());
    h.Handshake(Challenge{});
    std::optional<DoFinish> f =
        Find<DoFinish>(h.Receive(Refused{"rendezvous head:29400: run id 'x' is not this job's"}));
    REQUIRE(f);
    CHECK(f->error == "rendezvous head:29400: refused (rendezvous head:29400: run id 'x' is not this job's)");
  }
  {
    AgentHarness h(Options());
    h.Handshake(Challenge{});
    std::optional<DoFinish> f = Find<DoFinish>(h.Receive(Abort{"rendezvous head:29400: timed out", 1}));
    REQUIRE(f);
    CHECK(f->code == 1);
    CHECK(f->error == "rendezvous head:29400: timed out");
  }
}

TEST_CASE("agent: an assignment runs the workers; done goes out and the barrier's done ends the node", "[agent]") {
  AgentHarness h(Options());
  std::optional<DoRunWorkers> run = Find<DoRunWorkers>(h.Joined(Gen(1)));
  REQUIRE(run);
  CHECK(run->assignment.generation == 1);
  CHECK(h.m.state() == AgentMachine::State::kRunning);
  std::vector<AgentAction> out = h.Take(h.m.OnWorkersDone(0, h.now));
  CHECK(*Sent<Done>(out) == Done{1, 1, 0});
  CHECK(h.m.state() == AgentMachine::State::kBarrier);
  std::optional<DoFinish> f = Find<DoFinish>(h.Receive(Done{1, 1, 0}));
  REQUIRE(f);
  CHECK(f->code == 0);
  CHECK(f->error.empty());
}

TEST_CASE("agent: a local failure goes out with this generation and node rank", "[agent]") {
  AgentHarness h(Options());
  h.Joined(Gen(3));
  std::vector<AgentAction> out = h.Take(h.m.OnWorkerFailed(5, 7, "exited with code 7"));
  CHECK(*Sent<WorkerFailed>(out) == WorkerFailed{3, 1, 5, 7, "exited with code 7"});
}

TEST_CASE("agent: an abort while running stops the workers, then the node exits with the job's code", "[agent]") {
  AgentHarness h(Options());
  h.Joined(Gen(1));
  std::optional<DoStopWorkers> stop = Find<DoStopWorkers>(h.Receive(Abort{"node 0 rank 1 exited with code 3", 3}));
  REQUIRE(stop);
  CHECK(stop->code == 3);
  CHECK(stop->reason == "node 0 rank 1 exited with code 3");
  CHECK(h.m.state() == AgentMachine::State::kStopping);
  std::optional<DoFinish> f = Find<DoFinish>(h.Take(h.m.OnWorkersDone(3, h.now)));
  REQUIRE(f);
  CHECK(f->code == 3);
}

TEST_CASE("agent: a hosting agent does not print the abort reason twice", "[agent]") {
  AgentMachineOptions o = Options();
  o.hosted = true;
  AgentHarness h(o);
  h.Joined(Gen(1));
  CHECK(Find<DoStopWorkers>(h.Receive(Abort{"why", 3}))->reason.empty());
}

TEST_CASE("agent: a new generation while running restarts the workers once they stopped", "[agent]") {
  AgentHarness h(Options());
  h.Joined(Gen(1));
  std::optional<DoStopWorkers> stop = Find<DoStopWorkers>(h.Receive(Gen(2, 0)));
  REQUIRE(stop);
  CHECK(stop->reason == "rendezvous head:29400: restarting the job as generation 2");
  // A third generation before the workers stopped replaces the second.
  CHECK(h.Receive(Gen(3, 0)).empty());
  std::optional<DoRunWorkers> run = Find<DoRunWorkers>(h.Take(h.m.OnWorkersDone(143, h.now)));
  REQUIRE(run);
  CHECK(run->assignment.generation == 3);
  CHECK(*Sent<Done>(h.Take(h.m.OnWorkersDone(0, h.now))) == Done{3, 0, 0});
}

TEST_CASE("agent: a restart that reaches a node already in the barrier runs the workers again", "[agent]") {
  AgentHarness h(Options());
  h.Joined(Gen(1));
  h.Take(h.m.OnWorkersDone(0, h.now));
  std::optional<DoRunWorkers> run = Find<DoRunWorkers>(h.Receive(Gen(2)));
  REQUIRE(run);
  CHECK(h.m.state() == AgentMachine::State::kRunning);
}

TEST_CASE("agent: in the barrier, an abort ends the node with its own failure code first", "[agent]") {
  AgentHarness h(Options());
  h.Joined(Gen(1));
  h.Take(h.m.OnWorkersDone(7, h.now));
  std::optional<DoFinish> f = Find<DoFinish>(h.Receive(Abort{"node 1 (a) rank 3 exited with code 7", 7}));
  REQUIRE(f);
  CHECK(f->code == 7);
}

TEST_CASE("agent: a silent coordinator is lost after the heartbeat timeout", "[agent]") {
  AgentHarness h(Options());
  h.Joined(Gen(1));
  h.TickAt(5s);
  h.TickAt(10s);
  CHECK(h.TickAt(15s).size() == 1);  // a heartbeat, nothing more
  std::vector<AgentAction> out = h.TickAt(15s + 1ms);
  CHECK(Find<DoHangUp>(out));
  std::optional<DoStopWorkers> stop = Find<DoStopWorkers>(out);
  REQUIRE(stop);
  CHECK(stop->reason == "rendezvous head:29400: lost the coordinator (nothing heard for 15.0s)");
  // No heartbeat on a connection that is gone; the node exits 1 once its workers stopped.
  size_t beats = h.Heartbeats();
  h.TickAt(30s);
  CHECK(h.Heartbeats() == beats);
  CHECK(Find<DoFinish>(h.Take(h.m.OnWorkersDone(0, h.now)))->code == 1);
}

TEST_CASE("agent: being heard keeps the coordinator alive", "[agent]") {
  AgentHarness h(Options());
  h.Joined(Gen(1));
  for (int s = 5; s <= 60; s += 5) {
    h.TickAt(std::chrono::seconds(s));
    h.Receive(Heartbeat{});
  }
  CHECK(h.m.state() == AgentMachine::State::kRunning);
}

TEST_CASE("agent: a coordinator whose answer waits unread is not lost: this agent is the one behind", "[agent]") {
  AgentHarness h(Options());
  h.Joined(Gen(1));
  h.TickAt(5s);
  // Starved or stopped from 5 s to 40 s: the answer to the 5 s beat arrived, unread.
  std::vector<AgentAction> out = h.TickAt(40s, true);
  CHECK_FALSE(Find<DoStopWorkers>(out));
  CHECK(h.m.state() == AgentMachine::State::kRunning);
  CHECK(Find<DoSend>(out));  // the beat that was due goes out now
  // Counted as heard at 40 s, so lost only a full timeout later if nothing comes.
  CHECK_FALSE(Find<DoStopWorkers>(h.TickAt(55s)));
  CHECK(Find<DoStopWorkers>(h.TickAt(55s + 1ms)));
}

TEST_CASE("agent: a closed connection while joined is a lost coordinator", "[agent]") {
  {
    AgentHarness h(Options());
    h.Handshake(Challenge{});
    std::optional<DoFinish> f = Find<DoFinish>(h.Take(h.m.OnClosed(Status::PeerLost("closed by the peer"), h.now)));
    REQUIRE(f);
    CHECK(f->error == "rendezvous head:29400: lost the coordinator (closed by the peer)");
  }
  {
    AgentHarness h(Options());
    h.Joined(Gen(1));
    h.Take(h.m.OnWorkersDone(0, h.now));
    std::optional<DoFinish> f = Find<DoFinish>(h.Take(h.m.OnClosed(Status::PeerLost("closed by the peer"), h.now)));
    REQUIRE(f);
    CHECK(f->code == 1);
  }
}

TEST_CASE("agent: a connection closed during the handshake is retried", "[agent]") {
  AgentHarness h(Options());
  h.Start();
  h.Connected();
  h.Take(h.m.OnClosed(Status::PeerLost("closed by the peer"), h.now));
  CHECK(h.m.state() == AgentMachine::State::kBackoff);
}

TEST_CASE("agent: a job that ends without this late node ends it with the job's code", "[agent]") {
  AgentHarness h(Options());
  h.Handshake(Challenge{});
  std::optional<DoFinish> f = Find<DoFinish>(h.Receive(Done{1, -1, 0}));
  REQUIRE(f);
  CHECK(f->code == 0);
  CHECK(f->error == "rendezvous head:29400: the job ended without this node");
}

TEST_CASE("agent: after finishing, nothing more happens", "[agent]") {
  AgentHarness h(Options());
  h.Joined(Gen(1));
  h.Take(h.m.OnWorkersDone(0, h.now));
  h.Receive(Done{1, 1, 0});
  CHECK(h.Receive(Abort{"late", 1}).empty());
  CHECK(h.TickAt(100s).empty());
  CHECK_FALSE(h.m.NextDeadline());
}

}  // namespace dlaunch::rendezvous

namespace dlaunch::rendezvous {

TEST_CASE("agent: a standby stops the workers and waits, joined, for the next generation", "[agent][recovery]") {
  AgentHarness h(Options());
  h.Joined(Gen(1));
  std::optional<DoStopWorkers> stop = Find<DoStopWorkers>(h.Receive(Standby{1, "node 2 (c) lost; waiting"}));
  REQUIRE(stop);
  CHECK(stop->reason == "node 2 (c) lost; waiting");
  // Its workers stop: a Done for the stopped generation says they are gone (the
  // next generation waits for it); no finish; the node stays joined and beats.
  std::vector<AgentAction> out = h.Take(h.m.OnWorkersDone(143, h.now));
  CHECK_FALSE(Find<DoFinish>(out));
  REQUIRE(Sent<Done>(out));
  CHECK(Sent<Done>(out)->generation == 1);
  CHECK(Sent<Done>(out)->exit_code == 143);
  CHECK(h.m.state() == AgentMachine::State::kJoining);
  CHECK(Sent<Heartbeat>(h.TickAt(6s)));
  // A worker failure now belongs to no generation: nothing goes out.
  CHECK(h.Take(h.m.OnWorkerFailed(0, 1, "exited with code 1")).empty());
  std::optional<DoRunWorkers> run = Find<DoRunWorkers>(h.Receive(Gen(2)));
  REQUIRE(run);
  CHECK(run->assignment.generation == 2);
}

TEST_CASE("agent: a standby for another generation, or after the end, changes nothing", "[agent][recovery]") {
  AgentHarness h(Options());
  h.Joined(Gen(2));
  CHECK(h.Receive(Standby{1, "old"}).empty());
  CHECK(h.m.state() == AgentMachine::State::kRunning);
  // A restart on its way is called off by a standby of the same generation.
  h.Receive(Gen(3, 0));
  h.Receive(Standby{3, "backoff"});
  std::vector<AgentAction> out = h.Take(h.m.OnWorkersDone(143, h.now));
  CHECK_FALSE(Find<DoRunWorkers>(out));
  CHECK(h.m.state() == AgentMachine::State::kJoining);
  // An abort while stopping stays an abort.
  AgentHarness g(Options());
  g.Joined(Gen(1));
  g.Receive(Abort{"boom", 3});
  g.Receive(Standby{1, "late"});
  CHECK(Find<DoFinish>(g.Take(g.m.OnWorkersDone(0, g.now)))->code == 3);
  CHECK(g.m.state() == AgentMachine::State::kEnded);
}

TEST_CASE("agent: a node in the barrier that gets a standby waits again", "[agent][recovery]") {
  AgentHarness h(Options());
  h.Joined(Gen(1));
  h.Take(h.m.OnWorkersDone(0, h.now));
  std::vector<AgentAction> out = h.Receive(Standby{1, "node 0 (a) lost"});
  CHECK(h.m.state() == AgentMachine::State::kJoining);
  REQUIRE(Find<DoNotice>(out));
  CHECK(Find<DoNotice>(out)->line == "node 0 (a) lost");
  CHECK(Find<DoRunWorkers>(h.Receive(Gen(2))));
}

TEST_CASE("agent: heartbeats carry each rank's progress, and a failure sends it first", "[agent][recovery]") {
  AgentMachineOptions o = Options();
  std::vector<std::int64_t> progress = {-1, 7};
  o.progress = [&progress] { return progress; };
  AgentHarness h(o);
  h.Joined(Gen(1));
  std::optional<Heartbeat> beat = Sent<Heartbeat>(h.TickAt(6s));
  REQUIRE(beat);
  CHECK(beat->progress == std::vector<std::int64_t>{-1, 7});
  progress = {4'000'000'000, 8};
  std::vector<AgentAction> out = h.Take(h.m.OnWorkerFailed(1, 3, "exited with code 3"));
  REQUIRE(out.size() == 2);
  CHECK(std::get<DoSend>(out[0]).message == Message(Heartbeat{0, {4'000'000'000, 8}}));
  CHECK(std::holds_alternative<WorkerFailed>(std::get<DoSend>(out[1]).message));
  // Not running: no progress in the beat.
  h.Receive(Standby{1, ""});
  h.Take(h.m.OnWorkersDone(143, h.now));
  beat = Sent<Heartbeat>(h.TickAt(20s));
  REQUIRE(beat);
  CHECK(beat->progress.empty());
}

TEST_CASE("agent: the hello carries the job's recovery flags", "[agent][recovery]") {
  AgentMachineOptions o = Options();
  o.spares = 2;
  o.max_no_progress_restarts = 3;
  o.backoff_min = std::chrono::seconds(10);
  o.backoff_max = std::chrono::hours(24 * 365);  // capped at INT_MAX ms on the wire
  AgentHarness h(o);
  h.Start();
  std::optional<Hello> hello = Sent<Hello>(h.Connected());
  REQUIRE(hello);
  CHECK(hello->spares == 2);
  CHECK(hello->max_no_progress_restarts == 3);
  CHECK(hello->backoff_min_ms == 10'000);
  CHECK(hello->backoff_max_ms == std::numeric_limits<int>::max());
}

TEST_CASE("agent: a node that leaves says Leave, then hangs up, and ends without a finish", "[agent][recovery]") {
  // A spare: joined, never assigned, so it has no node rank yet.
  AgentHarness spare(Options());
  spare.Handshake(Challenge{});
  std::vector<AgentAction> out = spare.Take(spare.m.Leave());
  REQUIRE(out.size() == 2);
  REQUIRE(Sent<Leave>(out));
  CHECK(Sent<Leave>(out)->node_rank == -1);
  CHECK(std::holds_alternative<DoHangUp>(out[1]));  // after the Leave: the session writes it, then closes
  CHECK_FALSE(Find<DoFinish>(out));
  CHECK(spare.m.state() == AgentMachine::State::kEnded);
  // Nothing more: no heartbeat, no lost coordinator, no second Leave.
  CHECK_FALSE(spare.m.NextDeadline());
  CHECK(spare.TickAt(100s).empty());
  CHECK(spare.Take(spare.m.OnClosed(Status::PeerLost("closed"), spare.now)).empty());
  CHECK(spare.Take(spare.m.Leave()).empty());

  // Standing by after a lost node: it names its last node rank.
  AgentHarness standby(Options());
  standby.Joined(Gen(1, 1));
  standby.Receive(Standby{1, "node 0 (a) lost"});
  standby.Take(standby.m.OnWorkersDone(143, standby.now));
  REQUIRE(standby.m.state() == AgentMachine::State::kJoining);
  REQUIRE(Sent<Leave>(standby.Take(standby.m.Leave())));
  CHECK(Sent<Leave>(standby.all)->node_rank == 1);

  // Not joined yet: nothing to tell, the connect in flight is dropped.
  AgentHarness connecting(Options());
  connecting.Start();
  out = connecting.Take(connecting.m.Leave());
  REQUIRE(out.size() == 1);
  CHECK(std::holds_alternative<DoHangUp>(out[0]));
  CHECK(connecting.m.state() == AgentMachine::State::kEnded);
  CHECK(connecting.Take(connecting.m.OnConnected("10.0.0.2", connecting.now)).empty());
}

}  // namespace dlaunch::rendezvous

namespace dlaunch::rendezvous {

TEST_CASE("agent: the job ends while its workers stop for a restart: the job's code, not theirs", "[agent][recovery]") {
  AgentHarness h(Options());
  h.Joined(Gen(3));
  h.Receive(Gen(4, 0));  // restart: the workers are being stopped
  h.Receive(Abort{"node 1 (b) rank 1 exited with code 3", 3});
  std::optional<DoFinish> f = Find<DoFinish>(h.Take(h.m.OnWorkersDone(1, h.now)));  // as stopped
  REQUIRE(f);
  CHECK(f->code == 3);
  // A failure of its own before the end still wins, as before.
  AgentHarness g(Options());
  g.Joined(Gen(1));
  g.Receive(Abort{"node 1 (b) rank 1 exited with code 3", 3});
  CHECK(Find<DoFinish>(g.Take(g.m.OnWorkersDone(7, g.now)))->code == 7);
}

}  // namespace dlaunch::rendezvous

namespace dlaunch::rendezvous {

TEST_CASE("agent: the job ends while this node stands by: the job's code", "[agent][recovery]") {
  AgentHarness h(Options());
  h.Joined(Gen(2));
  h.Receive(Standby{2, "restarting"});
  h.Take(h.m.OnWorkersDone(1, h.now));
  REQUIRE(h.m.state() == AgentMachine::State::kJoining);
  std::optional<DoFinish> f = Find<DoFinish>(h.Receive(Abort{"2 restarts in a row made no progress", 123}));
  REQUIRE(f);
  CHECK(f->code == 123);
  CHECK(f->error == "2 restarts in a row made no progress");
  // Before any generation, an abort is a failed join: 1.
  AgentHarness g(Options());
  g.Handshake(Challenge{});
  CHECK(Find<DoFinish>(g.Receive(Abort{"timed out waiting for 1 of 2 nodes", 9}))->code == 1);
}

}  // namespace dlaunch::rendezvous
