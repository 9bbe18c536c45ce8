// Connection on real loopback sockets: frames larger than the shared read
// buffer, many queued behind a write the peer's window cannot take at once, and
// a Close that still delivers what was queued.
#include "rendezvous/connection.hpp"

#include <memory>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>

#include "tests/rendezvous/run_until.hpp"

namespace dlaunch::rendezvous {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// Two connected Connections on 127.0.0.1; `b` records what it receives.
struct ConnPair {
  explicit ConnPair(asio::io_context& io) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    tcp::socket client(io), server(io);
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server);
    a = std::make_shared<Connection>(std::move(client));
    b = std::make_shared<Connection>(std::move(server));
    a->Start([](Message) {}, [](const Status&) {});
    b->Start([this](Message m) { inbox.push_back(std::move(m)); },
             [this](const Status& why) { closed = why.message(); });
  }
  std::shared_ptr<Connection> a, b;
  std::vector<Message> inbox;
  std::string closed;
};

Report Big(int id) {
  // 512 KiB in items of 4 KiB (kMaxString), each telling its report and place.
  Report r;
  r.id = id;
  for (int i = 0; i < 128; ++i) r.items.push_back(std::string(4000, static_cast<char>('a' + (id + i) % 26)));
  return r;
}

}  // namespace

TEST_CASE("connection: 32 MiB of frames sent at once arrive whole and in order", "[connection]") {
  asio::io_context io;
  ConnPair pair(io);
  // All queued before the loop runs: the first write takes what the socket
  // buffer holds, the rest waits its turn (and the reader sees frames cut across
  // its 64 KiB reads).
  for (int id = 0; id < 64; ++id) pair.a->Send(Big(id));
  REQUIRE(dlaunch::testing::RunUntil(
      io, [&] { return pair.inbox.size() == 64; }, std::chrono::seconds(20)));
  for (int id = 0; id < 64; ++id) {
    INFO("report " << id);
    const auto* r = std::get_if<Report>(&pair.inbox[static_cast<std::size_t>(id)]);
    REQUIRE(r != nullptr);
    CHECK(*r == Big(id));
  }
  CHECK(pair.closed.empty());
}

TEST_CASE("connection: Close delivers what was queued, then the peer sees the close", "[connection]") {
  asio::io_context io;
  ConnPair pair(io);
  for (int id = 0; id < 8; ++id) pair.a->Send(Big(id));
  pair.a->Send(Heartbeat{7});
  pair.a->Close();
  pair.a->Send(Heartbeat{8});  // after Close: dropped
  REQUIRE(dlaunch::testing::RunUntil(
      io, [&] { return !pair.closed.empty(); }, std::chrono::seconds(20)));
  REQUIRE(pair.inbox.size() == 9);
  CHECK(std::get<Heartbeat>(pair.inbox.back()).silent_ms == 7);
  CHECK(pair.closed == "closed by the peer");
}

}  // namespace dlaunch::rendezvous
