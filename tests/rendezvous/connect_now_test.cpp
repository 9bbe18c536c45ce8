// StartConnect: a refusal the kernel knows when connect(2) returns is reported
// there, with no socket left open; a connect that can succeed hands back a
// non-blocking, close-on-exec socket; a full descriptor table is an error, not
// a crash or a leak.
#include "rendezvous/connect_now.hpp"

#include <cerrno>

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>

#include "tests/rendezvous/closed_port.hpp"

namespace dlaunch::rendezvous {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// The lowest descriptor number free now: where the next open lands.
int NextFd() {
  int fd = ::dup(0);
  REQUIRE(fd >= 0);
  ::close(fd);
  return fd;
}

TEST_CASE("StartConnect to a loopback port nobody listens on fails at once and leaves nothing open", "[connect_now]") {
  asio::io_context io;
  tcp::endpoint closed(asio::ip::make_address("127.0.0.1"),
                       static_cast<unsigned short>(dlaunch::testing::ClosedPort(io)));
  int next = NextFd();
  StartedConnect started = StartConnect(closed);
  CHECK(started.fd == -1);
  CHECK(started.error == ECONNREFUSED);
  CHECK(NextFd() == next);  // the socket was closed
}

TEST_CASE("StartConnect to a listener hands back a non-blocking, close-on-exec socket that connects", "[connect_now]") {
  asio::io_context io;
  tcp::acceptor listener(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  StartedConnect started = StartConnect(listener.local_endpoint());
  REQUIRE(started.fd >= 0);
  CHECK(started.error == 0);
  CHECK((::fcntl(started.fd, F_GETFL) & O_NONBLOCK) != 0);
  CHECK((::fcntl(started.fd, F_GETFD) & FD_CLOEXEC) != 0);
  pollfd p{started.fd, POLLOUT, 0};
  REQUIRE(::poll(&p, 1, 5000) == 1);
  CHECK(ConnectError(started.fd) == 0);
  tcp::socket accepted(io);
  listener.accept(accepted);
  CHECK(accepted.remote_endpoint().port() != 0);
  ::close(started.fd);
}

TEST_CASE("StartConnect with a full descriptor table says so and opens nothing", "[connect_now]") {
  asio::io_context io;
  tcp::acceptor listener(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
  rlimit full = old;
  full.rlim_cur = static_cast<rlim_t>(NextFd());  // no descriptor is left
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &full) == 0);
  StartedConnect started = StartConnect(listener.local_endpoint());
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &old) == 0);
  CHECK(started.fd == -1);
  CHECK(started.error == EMFILE);
}

TEST_CASE("ConnectError of a descriptor that is no socket is that error", "[connect_now]") {
  CHECK(ConnectError(-1) == EBADF);
}

}  // namespace
}  // namespace dlaunch::rendezvous
