// The server's handshake before any job: a job exists only once an authenticated
// Join arrives, sized by that agent's Hello. Real sockets on 127.0.0.1.
#include "rendezvous/server.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>

#include "rendezvous/auth.hpp"
#include "tests/rendezvous/run_until.hpp"

namespace dlaunch::rendezvous {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using dlaunch::testing::RunUntil;

// A client connection that records what it receives.
struct Client {
  Client(asio::io_context& io, int port) {
    tcp::socket socket(io);
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    conn = std::make_shared<Connection>(std::move(socket));
    conn->Start([this](Message m) { inbox.push_back(std::move(m)); }, [this](const Status&) { closed = true; });
  }
  std::shared_ptr<Connection> conn;
  std::vector<Message> inbox;
  bool closed = false;
};

// The factory of `dlaunch coordinator`: every run id, sized by the Hello.
CoordinatorServer::JobFactory Daemon(const std::string& token) {
  return [token](const Hello& hello) -> Result<CoordinatorOptions> {
    CoordinatorOptions o;
    o.run_id = hello.run_id;
    o.min_nodes = hello.min_nodes;
    o.max_nodes = hello.max_nodes;
    o.token = token;
    return o;
  };
}

Join JoinOf(const std::string& run_id, const std::string& host) {
  Join j;
  j.run_id = run_id;
  j.host = host;
  j.addrs = {"127.0.0.1"};
  return j;
}

}  // namespace

TEST_CASE("the server creates a job only on an authenticated Join, sized by that agent", "[server]") {
  asio::io_context io;
  std::vector<std::string> log;
  auto started = CoordinatorServer::Start(io, HostPort{"127.0.0.1", 0}, "--listen", Daemon("T"),
                                          [&log](const std::string& line) { log.push_back(line); });
  REQUIRE(started.ok());
  CoordinatorServer& server = **started;

  // A junk Hello without a nonce is refused; with a nonce it gets a Challenge
  // and waits. Neither creates job42.
  Client junk(io, server.port());
  junk.conn->Send(Hello{kProtocolVersion, "job42", "", 100, 100, 0});
  REQUIRE(RunUntil(io, [&] { return junk.closed || !junk.inbox.empty(); }));
  std::string subject = "rendezvous 127.0.0.1:" + std::to_string(server.port());
  CHECK(junk.inbox.at(0) == Message(Refused{subject + ": this job needs a token, and the agent has none"}));
  Client idle(io, server.port());
  std::string idle_nonce(kNonceSize, 'i');
  idle.conn->Send(Hello{kProtocolVersion, "job42", idle_nonce, 100, 100, 0});
  REQUIRE(RunUntil(io, [&] { return !idle.inbox.empty(); }));
  CHECK(std::holds_alternative<Challenge>(idle.inbox.at(0)));
  // A wrong proof is refused too.
  idle.conn->Send(Proof{std::string(kProofSize, 'p')});
  REQUIRE(RunUntil(io, [&] { return idle.inbox.size() == 2; }));
  CHECK(idle.inbox.at(1) == Message(Refused{subject + ": wrong token (proof does not match)"}));
  REQUIRE_FALSE(log.empty());
  CHECK_THAT(log.at(0), Catch::StartsWith(subject + ": refused 127.0.0.1:") &&
                            Catch::EndsWith(" (this job needs a token, and the agent has none)"));
  CHECK(server.jobs() == 0);
  // The metrics' counters: two attempts, both refused for the token, nobody joined.
  CHECK(server.counters().hellos == 2);
  CHECK(server.counters().auth_refused == 2);
  CHECK(server.counters().joined == 0);
  // An agent with another token hangs up after the challenge (it checks the
  // coordinator's proof first): that is a refusal for the token too.
  Client other(io, server.port());
  other.conn->Send(Hello{kProtocolVersion, "job42", std::string(kNonceSize, 'o'), 100, 100, 0});
  REQUIRE(RunUntil(io, [&] { return !other.inbox.empty(); }));
  other.conn->Close();
  REQUIRE(RunUntil(io, [&] { return server.counters().auth_refused == 3; }));
  CHECK(server.counters().hellos == 3);

  // Two real agents of a 2-node job42: the job is theirs.
  std::vector<std::unique_ptr<Client>> agents;
  for (const char* host : {"a", "b"}) {
    auto c = std::make_unique<Client>(io, server.port());
    std::string nonce(kNonceSize, host[0]);
    c->conn->Send(Hello{kProtocolVersion, "job42", nonce, 2, 2, 0});
    REQUIRE(RunUntil(io, [&] { return !c->inbox.empty(); }));
    const Challenge& challenge = std::get<Challenge>(c->inbox.at(0));
    REQUIRE(CheckCoordinatorProof("T", nonce, challenge.nonce, "job42", challenge.proof).ok());
    c->conn->Send(Proof{ProofFor("T", Prover::kAgent, nonce, challenge.nonce, "job42")});
    c->conn->Send(JoinOf("job42", host));
    agents.push_back(std::move(c));
  }
  REQUIRE(RunUntil(io, [&] { return agents[0]->inbox.size() == 2 && agents[1]->inbox.size() == 2; }));
  CHECK(server.jobs() == 1);
  for (auto& c : agents) CHECK(std::get<Assignment>(c->inbox.at(1)).nnodes == 2);
  CHECK(server.counters().joined == 2);
  CHECK(server.counters().hellos == 5);
  CHECK(server.counters().auth_refused == 3);
}

TEST_CASE("a job with no agent connected is forgotten after the expiry", "[server]") {
  asio::io_context io;
  auto started = CoordinatorServer::Start(io, HostPort{"127.0.0.1", 0}, "--listen", Daemon(""), nullptr);
  REQUIRE(started.ok());
  CoordinatorServer& server = **started;
  server.ExpireAbandonedJobs(std::chrono::milliseconds(200));
  {
    Client c(io, server.port());
    c.conn->Send(Hello{kProtocolVersion, "lonely", "", 2, 2, 0});
    c.conn->Send(JoinOf("lonely", "a"));
    REQUIRE(RunUntil(io, [&] { return server.jobs() == 1; }));
    c.conn->Close();
  }
  CHECK(RunUntil(io, [&] { return server.jobs() == 0; }));
}

TEST_CASE("a job's end summary is logged once, or not at all where its host says it", "[server]") {
  const bool logged = GENERATE(true, false);
  asio::io_context io;
  std::vector<std::string> log;
  auto started = CoordinatorServer::Start(io, HostPort{"127.0.0.1", 0}, "--listen", Daemon(""),
                                          [&log](const std::string& line) { log.push_back(line); });
  REQUIRE(started.ok());
  CoordinatorServer& server = **started;
  if (!logged) server.LogJobEnds(false);
  Client c(io, server.port());
  c.conn->Send(Hello{kProtocolVersion, "ends", "", 2, 2, 0});
  c.conn->Send(JoinOf("ends", "a"));
  REQUIRE(RunUntil(io, [&] { return server.jobs() == 1; }));
  server.AbortAll(3, "stopped by the test");
  REQUIRE(RunUntil(io, [&] { return !c.inbox.empty() && std::holds_alternative<Abort>(c.inbox.back()); }));
  REQUIRE(server.ended().has_value());
  const std::string summary = server.ended()->summary;
  CHECK_THAT(summary, Catch::EndsWith("stopped by the test"));
  CHECK(std::count(log.begin(), log.end(), summary) == (logged ? 1 : 0));
}

}  // namespace dlaunch::rendezvous
