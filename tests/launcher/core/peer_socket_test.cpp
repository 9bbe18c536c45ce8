#include "launcher/core/peer_socket.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <catch2/catch.hpp>

namespace dlaunch::launcher {
namespace {

namespace ip = boost::asio::ip;
using tcp = ip::tcp;

// A real connection over loopback: a client socket and the one the listener accepted.
struct Connection {
  Connection(boost::asio::io_context& io, const tcp::endpoint& listen_on, const tcp::endpoint& connect_to,
             bool client_v6 = false)
      : listener(io), client(io), accepted(io) {
    listener.open(listen_on.protocol());
    if (listen_on.address().is_v6()) listener.set_option(ip::v6_only(false));
    listener.bind(listen_on);
    listener.listen();
    client.open(client_v6 ? tcp::v6() : connect_to.protocol());
    if (client_v6) client.set_option(ip::v6_only(false));
    client.connect(tcp::endpoint(connect_to.address(), listener.local_endpoint().port()));
    listener.accept(accepted);
  }
  tcp::endpoint ours() const { return accepted.local_endpoint(); }
  tcp::endpoint theirs() const { return accepted.remote_endpoint(); }
  tcp::acceptor listener;
  tcp::socket client;
  tcp::socket accepted;
};

bool HasIpv6Loopback(boost::asio::io_context& io) {
  tcp::acceptor probe(io);
  boost::system::error_code ec;
  probe.open(tcp::v6(), ec);
  if (!ec) probe.bind(tcp::endpoint(ip::address_v6::loopback(), 0), ec);
  return !ec;
}

TEST_CASE("the kernel names this process's user as the owner of a loopback peer's socket", "[peer_socket]") {
  boost::asio::io_context io;
  KernelSocketOwners owners;
  const tcp::endpoint any_v4(ip::address_v4::loopback(), 0);
  const tcp::endpoint mapped(ip::make_address("::ffff:127.0.0.1"), 0);

  SECTION("IPv4") {
    Connection c(io, any_v4, any_v4);
    auto owner = owners.OwnerOf(c.ours(), c.theirs());
    REQUIRE(owner.ok());
    CHECK(owner->here);
    REQUIRE(owner->uid.has_value());
    CHECK(*owner->uid == geteuid());
  }
  SECTION("an IPv4 client of a dual-stack listener: the ends are IPv4-mapped") {
    Connection c(io, tcp::endpoint(ip::address_v6::any(), 0), any_v4);
    REQUIRE(c.theirs().address().is_v6());
    auto owner = owners.OwnerOf(c.ours(), c.theirs());
    REQUIRE(owner.ok());
    CHECK(owner->here);
    REQUIRE(owner->uid.has_value());
    CHECK(*owner->uid == geteuid());
  }
  SECTION("an IPv6 client socket that connects to an IPv4 address") {
    Connection c(io, any_v4, mapped, /*client_v6=*/true);
    auto owner = owners.OwnerOf(c.ours(), c.theirs());
    REQUIRE(owner.ok());
    CHECK(owner->here);
    REQUIRE(owner->uid.has_value());
    CHECK(*owner->uid == geteuid());
  }
  SECTION("IPv6 loopback") {
    if (!HasIpv6Loopback(io)) {
      WARN("no IPv6 loopback here");
      return;
    }
    const tcp::endpoint v6(ip::address_v6::loopback(), 0);
    Connection c(io, v6, v6);
    auto owner = owners.OwnerOf(c.ours(), c.theirs());
    REQUIRE(owner.ok());
    CHECK(owner->here);
    REQUIRE(owner->uid.has_value());
    CHECK(*owner->uid == geteuid());
  }
}

TEST_CASE("no owner for a closed peer, a listener or a connection that does not exist", "[peer_socket]") {
  boost::asio::io_context io;
  KernelSocketOwners owners;
  const tcp::endpoint lo(ip::address_v4::loopback(), 0);
  Connection c(io, lo, lo);

  SECTION("the peer closed its socket: the kernel's remnant of it is here, with no owner") {
    c.client.close();
    auto owner = owners.OwnerOf(c.ours(), c.theirs());
    REQUIRE(owner.ok());
    CHECK(owner->here);
    CHECK_FALSE(owner->uid.has_value());
  }
  SECTION("their end is a listening port: the kernel's lookup finds the listener, which is not the peer") {
    auto owner = owners.OwnerOf(tcp::endpoint(lo.address(), 1), c.listener.local_endpoint());
    REQUIRE(owner.ok());
    CHECK_FALSE(owner->here);
    CHECK_FALSE(owner->uid.has_value());
  }
  SECTION("a four-tuple of no connection") {
    auto owner = owners.OwnerOf(c.ours(), tcp::endpoint(ip::make_address("127.0.0.2"), c.theirs().port()));
    REQUIRE(owner.ok());
    CHECK_FALSE(owner->here);
    CHECK_FALSE(owner->uid.has_value());
  }
}

TEST_CASE("another user's loopback socket is named as that user's", "[peer_socket]") {
  if (geteuid() != 0) {
    WARN("needs root to connect as another user");
    return;
  }
  boost::asio::io_context io;
  tcp::acceptor listener(io, tcp::endpoint(ip::address_v4::loopback(), 0));
  const unsigned short port = listener.local_endpoint().port();
  int done[2];
  REQUIRE(pipe(done) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // nobody's socket; it stays open until the parent has asked.
    close(done[1]);
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
    boost::asio::io_context cio;
    tcp::socket s(cio);
    boost::system::error_code ec;
    s.connect(tcp::endpoint(ip::address_v4::loopback(), port), ec);
    char b;
    if (read(done[0], &b, 1) < 0) _exit(4);
    _exit(ec ? 2 : 0);
  }
  close(done[0]);
  tcp::socket accepted(io);
  listener.accept(accepted);
  KernelSocketOwners owners;
  auto owner = owners.OwnerOf(accepted.local_endpoint(), accepted.remote_endpoint());
  close(done[1]);
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  REQUIRE(owner.ok());
  REQUIRE(owner->uid.has_value());
  CHECK(*owner->uid == 65534U);
}

TEST_CASE("this machine's addresses include loopback; IPv4-mapped addresses read as IPv4", "[peer_socket]") {
  std::vector<ip::address> mine = ThisMachineAddresses();
  CHECK(std::find(mine.begin(), mine.end(), ip::make_address("127.0.0.1")) != mine.end());
  CHECK(PlainAddress(ip::make_address("::ffff:10.1.2.3")) == ip::make_address("10.1.2.3"));
  CHECK(PlainAddress(ip::make_address("::1")) == ip::make_address("::1"));
  CHECK(PlainAddress(ip::make_address("10.1.2.3")) == ip::make_address("10.1.2.3"));
}

}  // namespace
}  // namespace dlaunch::launcher
