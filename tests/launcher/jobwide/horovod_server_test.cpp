#include "launcher/jobwide/horovod_server.hpp"

#include <unistd.h>

#include <chrono>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "envmap/layout.hpp"

namespace dlaunch::launcher {
namespace {

namespace ip = boost::asio::ip;
using tcp = ip::tcp;
using namespace std::chrono_literals;

// Every local peer's socket is `uid`'s.
class OwnedBy : public SocketOwners {
 public:
  explicit OwnedBy(uint32_t uid) : uid_(uid) {}
  Result<PeerSocket> OwnerOf(const tcp::endpoint&, const tcp::endpoint&) override { return PeerSocket{true, uid_}; }

 private:
  std::optional<uint32_t> uid_;
};

envmap::JobLayout OneNode(const std::string& master_addr) {
  envmap::JobLayout layout;
  layout.master_addr = master_addr;
  layout.master_port = 0;  // the store on port 1 would need root; see FreeStorePort
  layout.nodes.push_back(envmap::Node{"here", master_addr, 2, {}});
  return layout;
}

// A master port whose store port (+1) is free now.
int FreeStorePort(boost::asio::io_context& io) {
  tcp::acceptor probe(io, tcp::endpoint(ip::address_v4::loopback(), 0));
  return probe.local_endpoint().port() - 1;
}

// One GET over a fresh connection, serving `io` meanwhile: the status line, or
// "closed" when the store hangs up unanswered.
std::string Get(boost::asio::io_context& io, int port, const std::string& target) {
  tcp::socket s(io);
  s.connect(tcp::endpoint(ip::address_v4::loopback(), static_cast<unsigned short>(port)));
  const std::string request = "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  boost::asio::write(s, boost::asio::buffer(request));
  s.non_blocking(true);
  std::string got;
  char buf[1024];
  auto end = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < end) {
    boost::system::error_code ec;
    size_t n = s.read_some(boost::asio::buffer(buf), ec);
    if (ec == boost::asio::error::would_block) {
      io.run_one_for(5ms);
      continue;
    }
    if (ec) break;
    got.append(buf, n);
  }
  return got.empty() ? "closed" : got.substr(0, got.find("\r\n"));
}

TEST_CASE("the Horovod store serves a local peer of the job's user and refuses another user's", "[horovod_store]") {
  boost::asio::io_context io;
  envmap::JobLayout layout = OneNode("127.0.0.1");
  layout.master_port = FreeStorePort(io);
  std::vector<std::string> lines;
  auto say = [&lines](const std::string& l) { lines.push_back(l); };

  SECTION("the job's user") {
    auto store = HorovodServer::Start(io, layout, true, say, std::make_shared<OwnedBy>(geteuid()));
    REQUIRE(store.ok());
    CHECK(Get(io, (*store)->port(), "/global/none") == "HTTP/1.1 404 Not Found");
  }
  SECTION("another user") {
    auto store = HorovodServer::Start(io, layout, true, say, std::make_shared<OwnedBy>(geteuid() + 1));
    REQUIRE(store.ok());
    CHECK(Get(io, (*store)->port(), "/global/none") == "closed");
    REQUIRE(!lines.empty());
    CHECK(lines.back().find(fmt::format("horovod store on 127.0.0.1:{}: refused 127.0.0.1:", (*store)->port())) == 0);
    CHECK(lines.back().find(fmt::format("(a socket of uid {}, not the job's uid {})", geteuid() + 1, geteuid())) !=
          std::string::npos);
  }
  SECTION("the real kernel: this test's own socket is the job's user's") {
    auto store = HorovodServer::Start(io, layout, true, say);
    REQUIRE(store.ok());
    CHECK(Get(io, (*store)->port(), "/global/none") == "HTTP/1.1 404 Not Found");
  }
}

TEST_CASE("the Horovod store listens on MASTER_ADDR or not at all", "[horovod_store]") {
  boost::asio::io_context io;
  std::vector<std::string> lines;
  auto say = [&lines](const std::string& l) { lines.push_back(l); };

  SECTION("a name that does not resolve is named, and nothing listens") {
    envmap::JobLayout layout = OneNode("no-such-host.invalid");
    layout.master_port = FreeStorePort(io);
    auto store = HorovodServer::Start(io, layout, true, say);
    REQUIRE_FALSE(store.ok());
    CHECK(store.status().message().rfind("horovod store: cannot listen on MASTER_ADDR no-such-host.invalid "
                                         "(does not resolve here: ",
                                         0) == 0);
  }
  SECTION("an address of another machine is named, and nothing listens on every interface") {
    envmap::JobLayout layout = OneNode("192.0.2.1");  // TEST-NET-1: never this machine's
    layout.master_port = FreeStorePort(io);
    auto store = HorovodServer::Start(io, layout, true, say);
    REQUIRE_FALSE(store.ok());
    CHECK(store.status().message().rfind(
              fmt::format("horovod store: cannot listen on 192.0.2.1:{} (", layout.master_port + 1), 0) == 0);
    CHECK(store.status().message().find("(MASTER_ADDR 192.0.2.1, MASTER_PORT + 1)") != std::string::npos);
    tcp::socket probe(io);
    boost::system::error_code ec;
    probe.connect(tcp::endpoint(ip::address_v4::loopback(), static_cast<unsigned short>(layout.master_port + 1)), ec);
    CHECK(ec);
  }
  SECTION("nodes unknown: one line says that any remote peer is served") {
    envmap::JobLayout layout = OneNode("127.0.0.1");
    layout.master_port = FreeStorePort(io);
    auto store = HorovodServer::Start(io, layout, false, say);
    REQUIRE(store.ok());
    REQUIRE(lines.size() == 1);
    CHECK(lines[0] ==
          "horovod store: the static form names no other node (no -H, --hostfile or --nodes), so the store admits "
          "any remote peer that reaches it");
  }
}

TEST_CASE("HorovodServerOptions: a client per rank and some, bodies as large as a value", "[horovod_store]") {
  http::ServerOptions small = HorovodServerOptions(4);
  CHECK(small.max_clients == 68);
  CHECK(small.max_body == HorovodStoreLimitsFor(4).max_value);
  CHECK(small.name == "horovod store");
  CHECK(HorovodServerOptions(100000).max_clients == 4096);
}

}  // namespace
}  // namespace dlaunch::launcher
