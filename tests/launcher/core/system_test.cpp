#include "launcher/core/system.hpp"

#include <algorithm>
#include <set>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

using namespace dlaunch::launcher;

TEST_CASE("--bind-to core gives each rank an equal share of the allowed CPUs", "[system]") {
  const int cpus = CpuCount();
  for (int nproc : {1, 2, 3, 8}) {
    auto placement = CpuPlacement("core", nproc);
    REQUIRE(static_cast<int>(placement.size()) == nproc);
    const size_t share = static_cast<size_t>(std::max(1, cpus / nproc));
    std::set<int> used;
    for (const auto& mine : placement) {
      CHECK(mine.size() == share);
      used.insert(mine.begin(), mine.end());
    }
    // Shares do not overlap while there are enough CPUs.
    if (nproc <= cpus) CHECK(used.size() == share * static_cast<size_t>(nproc));
  }
  CHECK(CpuPlacement("none", 4).empty());
}

TEST_CASE("--bind-to numa gives every rank a non-empty set", "[system]") {
  auto placement = CpuPlacement("numa", 3);
  REQUIRE(placement.size() == 3);
  for (const auto& mine : placement) CHECK_FALSE(mine.empty());
}

TEST_CASE("a port with a listener is refused, naming the flag", "[system]") {
  auto free_port = PortReservation::AnyFree();
  REQUIRE(free_port.ok());
  const int port = free_port->port();
  free_port->Release();

  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(fd, 1) == 0);

  auto taken = PortReservation::Exactly(port, "--master-port " + std::to_string(port));
  REQUIRE_FALSE(taken.ok());
  CHECK(taken.status().message() == "--master-port " + std::to_string(port) + ": Address already in use");
  close(fd);
  // Once the listener is gone the port can be reserved again.
  CHECK(PortReservation::Exactly(port, "--master-port").ok());
}

TEST_CASE("AnyFreeWithNext holds a free port and the one after it", "[system]") {
  PortReservation next;
  auto first = PortReservation::AnyFreeWithNext(&next);
  REQUIRE(first.ok());
  CHECK(next.port() == first->port() + 1);
  // Both are held: a listener on the second cannot take it from a socket that
  // does not set SO_REUSEADDR.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(next.port()));
  CHECK(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0);
  close(fd);
}

namespace {
// Binds PORT on 127.0.0.1 with SO_REUSEADDR set first and listens, as asio's
// acceptors and torch's TCPStore do. Returns the socket, or -1.
int ReuseListener(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 1) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}
}  // namespace

TEST_CASE("AnyFree keeps out even a binder that sets SO_REUSEADDR until released", "[system]") {
  auto hold = PortReservation::AnyFree();
  REQUIRE(hold.ok());
  // A worker's port picked by a test's free_port() elsewhere would otherwise
  // be listened on by that other program before the worker binds it.
  CHECK(ReuseListener(hold->port()) == -1);
  hold->Release();
  int fd = ReuseListener(hold->port());
  CHECK(fd >= 0);
  close(fd);
}

TEST_CASE("AnyFreeForStore: rank 0's store binds beside MASTER_PORT's hold", "[system]") {
  auto hold = PortReservation::AnyFreeForStore();
  REQUIRE(hold.ok());
  int fd = ReuseListener(hold->port());
  CHECK(fd >= 0);
  close(fd);
}

TEST_CASE("InterfaceToward: loopback goes out on lo; no route, no name", "[system]") {
  CHECK(InterfaceToward("127.0.0.1") == "lo");
  CHECK(InterfaceToward("localhost") == "lo");
  CHECK(InterfaceToward("no-such-host.invalid") == "");
}

TEST_CASE("IsInitialUidMap: only the identity map of every uid is the initial namespace", "[system]") {
  CHECK(IsInitialUidMap("         0          0 4294967295\n"));
  CHECK_FALSE(IsInitialUidMap("         0       1000          1\n"));  // unshare -r
  CHECK_FALSE(IsInitialUidMap("     12345      12345          1\n"));  // --map-current-user
  CHECK_FALSE(IsInitialUidMap("         0          0      65536\n"));
  CHECK_FALSE(IsInitialUidMap(""));
}
