// AgentSession: the agent's machine on real sockets. Against a real coordinator
// on loopback it joins, runs its workers and ends with their code; against a
// port nobody listens on, or a peer that is no coordinator, it ends with one
// line naming the endpoint, within its join timeout.
#include "rendezvous/agent_session.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>

#include "rendezvous/server.hpp"
#include "tests/rendezvous/closed_port.hpp"
#include "tests/rendezvous/run_until.hpp"

namespace dlaunch::rendezvous {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using dlaunch::testing::ClosedPort;
using dlaunch::testing::RunUntil;

// A loaded machine may take a while to run a session's few steps.
constexpr std::chrono::seconds kSessionLimit{10};

AgentMachineOptions SessionOptions(int port, std::chrono::milliseconds join_timeout) {
  AgentMachineOptions o;
  o.endpoint = HostPort{"127.0.0.1", port}.ToString();
  o.join.run_id = "session-test";
  o.join.host = "here";
  o.join.addrs = {"127.0.0.1"};
  o.join_timeout = join_timeout;
  o.retry_period = std::chrono::milliseconds(20);
  return o;
}

// What the session told its owner.
struct Seen {
  std::vector<Assignment> runs;
  std::optional<int> code;
  std::string error;
  std::vector<std::string> notices;
};

AgentSession::Hooks Record(Seen& seen) {
  return AgentSession::Hooks{[&seen](const Assignment& a) { seen.runs.push_back(a); },
                             [&seen](int code, const std::string& error) {
                               seen.code = code;
                               seen.error = error;
                             },
                             [&seen](const std::string& line) { seen.notices.push_back(line); }, nullptr};
}

TEST_CASE("AgentSession joins a real coordinator, runs its workers once and ends with their code", "[agent_session]") {
  asio::io_context io;
  CoordinatorOptions job;
  job.run_id = "session-test";
  job.min_nodes = job.max_nodes = 1;
  auto server = CoordinatorServer::Start(io, HostPort{"127.0.0.1", 0}, "--rdzv-endpoint",
                                         CoordinatorServer::OneJob(job), nullptr);
  REQUIRE(server.ok());
  Seen seen;
  AgentSession session(io, HostPort{"127.0.0.1", (*server)->port()},
                       SessionOptions((*server)->port(), std::chrono::seconds(10)), Record(seen));
  session.Start();
  REQUIRE(RunUntil(
      io, [&] { return !seen.runs.empty() || seen.code; }, kSessionLimit));
  REQUIRE(seen.runs.size() == 1);
  CHECK(seen.runs[0].world_size == 1);
  CHECK(seen.runs[0].node_rank == 0);
  CHECK_FALSE(seen.code);  // nothing ends while the workers run
  // The workers end with 3: the job ends with 3, and the session says so once.
  asio::post(io, [&session] { session.WorkersDone(3); });
  REQUIRE(RunUntil(
      io, [&] { return seen.code.has_value(); }, kSessionLimit));
  CHECK(*seen.code == 3);
  CHECK(seen.runs.size() == 1);
}

TEST_CASE("AgentSession with nobody at the endpoint gives up at its join timeout, naming the endpoint",
          "[agent_session]") {
  asio::io_context io;
  int port = ClosedPort(io);
  Seen seen;
  AgentSession session(io, HostPort{"127.0.0.1", port}, SessionOptions(port, std::chrono::milliseconds(300)),
                       Record(seen));
  auto started = std::chrono::steady_clock::now();
  session.Start();
  REQUIRE(RunUntil(
      io, [&] { return seen.code.has_value(); }, kSessionLimit));
  CHECK(*seen.code != 0);
  CHECK(seen.runs.empty());
  std::string said = seen.error;
  for (const std::string& n : seen.notices) said += "\n" + n;
  INFO(said);
  CHECK(said.find(HostPort{"127.0.0.1", port}.ToString()) != std::string::npos);
  CHECK(said.find("Connection refused") != std::string::npos);  // the kernel's reason, as it said it
  // It retried until the join timeout, not for ever.
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(8));
}

TEST_CASE("AgentSession refused until its host comes up joins it then", "[agent_session]") {
  asio::io_context io;
  int port = ClosedPort(io);
  Seen seen;
  AgentSession session(io, HostPort{"127.0.0.1", port}, SessionOptions(port, std::chrono::seconds(10)), Record(seen));
  session.Start();
  // Refused at once and asleep until its next try: the loop has nothing else to run.
  CHECK(session.state() == AgentMachine::State::kBackoff);
  io.run_for(std::chrono::milliseconds(120));  // a few tries, each refused
  CHECK(session.state() == AgentMachine::State::kBackoff);
  CHECK_FALSE(seen.code);
  CoordinatorOptions job;
  job.run_id = "session-test";
  job.min_nodes = job.max_nodes = 1;
  auto server = CoordinatorServer::Start(io, HostPort{"127.0.0.1", port}, "--rdzv-endpoint",
                                         CoordinatorServer::OneJob(job), nullptr);
  REQUIRE(server.ok());
  REQUIRE(RunUntil(
      io, [&] { return !seen.runs.empty() || seen.code; }, kSessionLimit));
  REQUIRE(seen.runs.size() == 1);
  CHECK(seen.runs[0].world_size == 1);
  asio::post(io, [&session] { session.WorkersDone(0); });
  REQUIRE(RunUntil(
      io, [&] { return seen.code.has_value(); }, kSessionLimit));
  CHECK(*seen.code == 0);
}

TEST_CASE("AgentSession refuses a peer that is no dlaunch coordinator", "[agent_session]") {
  asio::io_context io;
  tcp::acceptor impostor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  int port = impostor.local_endpoint().port();
  tcp::socket peer(io);
  // The impostor answers every connection with an HTTP reply and closes it.
  impostor.async_accept(peer, [&peer](boost::system::error_code ec) {
    if (ec) return;
    static const std::string kReply = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    asio::async_write(peer, asio::buffer(kReply), [&peer](boost::system::error_code, size_t) {
      boost::system::error_code ignored;
      peer.shutdown(tcp::socket::shutdown_send, ignored);
    });
  });
  Seen seen;
  AgentSession session(io, HostPort{"127.0.0.1", port}, SessionOptions(port, std::chrono::milliseconds(500)),
                       Record(seen));
  session.Start();
  REQUIRE(RunUntil(
      io, [&] { return seen.code.has_value(); }, kSessionLimit));
  CHECK(*seen.code != 0);
  CHECK(seen.runs.empty());
}

}  // namespace
}  // namespace dlaunch::rendezvous
