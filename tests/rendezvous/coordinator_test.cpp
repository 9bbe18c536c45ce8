#include "rendezvous/coordinator.hpp"

#include <limits>

#include <catch2/catch.hpp>

#include "rendezvous/auth.hpp"
#include "tests/rendezvous/coordinator_harness.hpp"

namespace dlaunch::rendezvous {

using testing::Harness;
using testing::MakeJoin;
using testing::Opts;
using namespace std::chrono_literals;

TEST_CASE("without a token, Hello gets an empty Challenge and Join follows", "[coordinator]") {
  Harness h(Opts(1, 1));
  ConnId a = h.Connect();
  h.Send(a, Hello{kProtocolVersion, "job42", "any"});
  REQUIRE(h.inbox[a].size() == 1);
  CHECK(h.inbox[a][0] == Message(Challenge{""}));
  h.Send(a, MakeJoin("a"));
  Assignment got = h.LastAssignment(a);
  CHECK(got.generation == 1);
  CHECK(got.node_rank == 0);
  CHECK(got.run_id == "job42");
  CHECK(h.c.state() == Coordinator::State::kRunning);
}

TEST_CASE("with a token, the right proof joins and a wrong one is refused while the job goes on", "[coordinator]") {
  CoordinatorOptions o = Opts(2, 2);
  o.token = "s3cret";
  Harness h(o);
  ConnId a = h.JoinAs(MakeJoin("a"));
  ConnId intruder = h.Handshake("guess");
  CHECK(h.closed.at(intruder) == "wrong token (proof does not match)");
  CHECK(h.inbox[intruder].back() == Message(Refused{"rendezvous head:29400: wrong token (proof does not match)"}));
  CHECK(h.HasLog("rendezvous head:29400: closed 10.0.0.2:5000: wrong token (proof does not match)"));
  // The intruder's Join after the refusal is ignored; a, b carry on.
  h.Send(intruder, MakeJoin("x"));
  CHECK(h.c.state() == Coordinator::State::kGathering);
  ConnId b = h.JoinAs(MakeJoin("b"));
  CHECK(h.LastAssignment(a).nodes.size() == 2);
  CHECK(h.LastAssignment(b).node_rank == 1);
  CHECK_FALSE(h.ended.has_value());
}

TEST_CASE("the proof is bound to this connection's nonces", "[coordinator]") {
  CoordinatorOptions o = Opts(1, 1);
  o.token = "s3cret";
  Harness h(o);
  ConnId a = h.Connect();
  std::string na(kNonceSize, 'n');
  h.Send(a, Hello{kProtocolVersion, "job42", na});
  const auto& challenge = std::get<Challenge>(h.inbox[a].at(0));
  CHECK(challenge.nonce.size() == kNonceSize);
  // A proof computed for another challenge nonce (a replay) is refused.
  h.Send(a, Proof{ProofFor("s3cret", Prover::kAgent, na, std::string(kNonceSize, 'x'), "job42")});
  CHECK(h.closed.at(a) == "wrong token (proof does not match)");
}

TEST_CASE("with a token, the Challenge carries the coordinator's proof over both nonces and the run id",
          "[coordinator]") {
  CoordinatorOptions o = Opts(1, 1);
  o.token = "s3cret";
  o.nonce_source = [] { return Result<std::string>(std::string(kNonceSize, 'c')); };
  Harness h(o);
  ConnId a = h.Connect();
  std::string na(kNonceSize, 'n');
  h.Send(a, Hello{kProtocolVersion, "job42", na});
  const auto& challenge = std::get<Challenge>(h.inbox[a].at(0));
  CHECK(challenge.nonce == std::string(kNonceSize, 'c'));
  CHECK(challenge.proof == ProofFor("s3cret", Prover::kCoordinator, na, challenge.nonce, "job42"));
  CHECK(CheckCoordinatorProof("s3cret", na, challenge.nonce, "job42", challenge.proof).ok());
  CHECK_FALSE(Verify("other", Prover::kCoordinator, na, challenge.nonce, "job42", challenge.proof));
  // Reflected back as the agent's own proof, it is refused.
  h.Send(a, Proof{challenge.proof});
  CHECK(h.closed.at(a) == "wrong token (proof does not match)");
}

TEST_CASE("without a token, the Challenge is empty: no nonce, no proof", "[coordinator]") {
  Harness h(Opts(1, 1));
  ConnId a = h.Connect();
  h.Send(a, Hello{kProtocolVersion, "job42", std::string(kNonceSize, 'n')});
  CHECK(h.inbox[a].at(0) == Message(Challenge{"", ""}));
}

TEST_CASE("a Join over the per-node cap is refused, and the world size stays below 2^31", "[coordinator]") {
  {
    Harness h(Opts(1, 1));
    ConnId a = h.JoinAs(MakeJoin("a", std::numeric_limits<int>::max()));
    CHECK(h.closed.at(a) == "join from host 'a': nproc 2147483647 is over the cap of 65536");
    CHECK(h.AssignmentsOf(a).empty());
  }
  // 32,768 nodes of 65,536 workers each make 2^31: the job ends, nobody gets a
  // negative WORLD_SIZE.
  Harness h(Opts(32768, 32768));
  std::vector<ConnId> conns;
  for (int i = 0; i < 32768; ++i) conns.push_back(h.JoinAs(MakeJoin("n" + std::to_string(i), kMaxNprocPerNode)));
  REQUIRE(h.ended.has_value());
  CHECK(h.ended->summary ==
        "rendezvous head:29400: 32768 nodes ask for 2147483648 workers in all, over the cap of 2147483647");
  CHECK(h.AssignmentsOf(conns.front()).empty());
  CHECK(h.inbox[conns.front()].back() == Message(Abort{h.ended->summary, 1}));
}

TEST_CASE("a long run id is quoted short, so the refusal still encodes", "[coordinator]") {
  Harness h(Opts(1, 1));
  ConnId a = h.Connect();
  h.Send(a, Hello{kProtocolVersion, std::string(kMaxString, 'x'), ""});
  const auto& refused = std::get<Refused>(h.inbox[a].back());
  CHECK(refused.reason ==
        "rendezvous head:29400: run id '" + std::string(64, 'x') + "...' (4096 bytes) is not this job's ('job42')");
  CHECK(CheckEncodable(refused).ok());
}

TEST_CASE("a Hello of another version, job or nonce size is refused", "[coordinator]") {
  CoordinatorOptions o = Opts(1, 1);
  o.token = "s3cret";
  static const struct {
    Hello hello;
    const char* problem;
  } kCases[] = {
      {{1, "job42", std::string(kNonceSize, 'n')}, "protocol version 1 is not supported (this coordinator speaks 5)"},
      {{kProtocolVersion, "job7", std::string(kNonceSize, 'n')}, "run id 'job7' is not this job's ('job42')"},
      {{kProtocolVersion, "job42", "short"}, "hello nonce of 5 bytes (expected 32)"},
      {{kProtocolVersion, "job42", ""}, "this job needs a token, and the agent has none"},
  };
  for (const auto& c : kCases) {
    INFO(c.problem);
    Harness h(o);
    ConnId a = h.Connect();
    h.Send(a, c.hello);
    CHECK(h.closed.at(a) == c.problem);
    CHECK(h.inbox[a].back() == Message(Refused{std::string("rendezvous head:29400: ") + c.problem}));
  }
}

TEST_CASE("out-of-order messages close that connection with a reason", "[coordinator]") {
  SECTION("join before the hello") {
    Harness h(Opts(2, 2));
    ConnId a = h.Connect();
    h.Send(a, MakeJoin("a"));
    CHECK(h.closed.at(a) == "unexpected join before the hello");
  }
  SECTION("join before the proof") {
    CoordinatorOptions o = Opts(2, 2);
    o.token = "s3cret";
    Harness h(o);
    ConnId a = h.Connect();
    h.Send(a, Hello{kProtocolVersion, "job42", std::string(kNonceSize, 'n')});
    h.Send(a, MakeJoin("a"));
    CHECK(h.closed.at(a) == "unexpected join before the proof");
  }
  SECTION("a proof when no token is set") {
    Harness h(Opts(2, 2));
    ConnId a = h.Connect();
    h.Send(a, Hello{kProtocolVersion, "job42", ""});
    h.Send(a, Proof{std::string(32, 'p')});
    CHECK(h.closed.at(a) == "unexpected proof before the join");
  }
  SECTION("a heartbeat before the join") {
    Harness h(Opts(2, 2));
    ConnId a = h.Handshake("");
    h.Send(a, Heartbeat{});
    CHECK(h.closed.at(a) == "unexpected heartbeat before the join");
  }
  SECTION("coordinator messages from an agent; the waiting others stay") {
    Harness h(Opts(3, 3));
    ConnId a = h.JoinAs(MakeJoin("a"));
    ConnId b = h.JoinAs(MakeJoin("b"));
    h.Send(b, Assignment{});
    CHECK(h.closed.at(b) == "unexpected assignment from an agent");
    CHECK(h.inbox[b].back() == Message(Refused{"rendezvous head:29400: unexpected assignment from an agent"}));
    CHECK_FALSE(h.closed.count(a));
    h.JoinAs(MakeJoin("c"));
    h.JoinAs(MakeJoin("d"));
    CHECK(h.LastAssignment(a).nodes.size() == 3);
  }
  SECTION("a second hello from an assigned node loses that node") {
    Harness h(Opts(2, 2));
    ConnId a = h.JoinAs(MakeJoin("a"));
    ConnId b = h.JoinAs(MakeJoin("b"));
    h.Send(b, Hello{});
    CHECK(h.closed.at(b) == "unexpected hello from an assigned node");
    CHECK(h.inbox[a].back() ==
          Message(Abort{"rendezvous head:29400: node 1 (b) lost (unexpected hello from an assigned node)", 1}));
  }
}

TEST_CASE("a connection that never joins is closed after the handshake timeout", "[coordinator]") {
  Harness h(Opts(2, 2));
  ConnId a = h.Connect();
  REQUIRE(h.c.NextDeadline().has_value());
  CHECK(*h.c.NextDeadline() == h.t0 + 10s);
  h.TickAt(9999ms);
  CHECK_FALSE(h.closed.count(a));
  h.TickAt(10s);
  CHECK(h.closed.at(a) == "no join within 10s");
  CHECK_FALSE(h.c.NextDeadline().has_value());
}

TEST_CASE("Join values are checked", "[coordinator]") {
  auto with = [](auto change) {
    Join j = MakeJoin("a");
    change(j);
    return j;
  };
  static const struct {
    Join join;
    const char* problem;
  } kCases[] = {
      {with([](Join& j) { j.run_id = "other"; }), "run id 'other' is not this job's ('job42')"},
      {with([](Join& j) { j.host = ""; }), "join without a host name"},
      {with([](Join& j) { j.addrs = {}; }), "join from host 'a': no address"},
      {with([](Join& j) { j.nproc = 0; }), "join from host 'a': nproc 0 is below 1"},
      {with([](Join& j) { j.gpus = -1; }), "join from host 'a': gpus -1 is negative"},
      {with([](Join& j) { j.master_port_hint = 70000; }),
       "join from host 'a': master port hint 70000 is outside 0..65535"},
      {with([](Join& j) {
         j.task_ports = {1, 2};
       }),
       "join from host 'a': 2 task ports for 1 processes"},
      {with([](Join& j) { j.requested_node_rank = 4; }), "node rank 4 is outside 0..3 (at most 4 nodes)"},
  };
  for (const auto& c : kCases) {
    INFO(c.problem);
    Harness h(Opts(2, 4));
    ConnId a = h.JoinAs(c.join);
    CHECK(h.closed.at(a) == c.problem);
  }
}

TEST_CASE("Validate names the first bad option", "[coordinator]") {
  auto with = [](auto change) {
    CoordinatorOptions o = Opts(2, 4);
    change(o);
    return o;
  };
  CHECK(Validate(Opts(2, 4)).ok());
  static const struct {
    CoordinatorOptions options;
    const char* error;
  } kCases[] = {
      {with([](auto& o) { o.run_id = ""; }), "--rdzv-id: empty run id"},
      {with([](auto& o) { o.min_nodes = 0; }), "--nnodes: minimum 0 is below 1"},
      {with([](auto& o) { o.max_nodes = 1; }), "--nnodes: minimum 2 is above maximum 1"},
      {with([](auto& o) { o.last_call_timeout = 0ms; }), "--rdzv-conf last_call_timeout: 0s is not positive"},
      {with([](auto& o) { o.max_restarts = -1; }), "--max-restarts: -1 is negative"},
      {with([](auto& o) { o.master_port = 65536; }), "--master-port: 65536 is outside 0..65535"},
      {with([](auto& o) {
         o.node_list = {"a", "b"};
       }),
       "--nodes: 2 hosts, but --nnodes allows 4"},
  };
  for (const auto& c : kCases) CHECK(Validate(c.options).message() == c.error);
  CHECK(FormatDuration(30s) == "30s");
  CHECK(FormatDuration(1500ms) == "1500ms");
}

}  // namespace dlaunch::rendezvous
