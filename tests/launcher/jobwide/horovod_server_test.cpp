#include "launcher/jobwide/horovod_server.hpp"

#include <catch2/catch.hpp>

namespace dlaunch::launcher {

TEST_CASE("HorovodPeerAllowed: loopback and the job's nodes, nothing else", "[horovod_store]") {
  namespace ip = boost::asio::ip;
  const std::vector<ip::address> nodes = {ip::make_address("10.0.0.1"), ip::make_address("10.0.0.2"),
                                          ip::make_address("fd00::7")};
  static const struct {
    const char* peer;
    bool allowed;
  } kCases[] = {
      {"10.0.0.1", true},          {"10.0.0.2", true},   {"::ffff:10.0.0.2", true},  // IPv4 on an IPv6 socket
      {"fd00::7", true},           {"127.0.0.1", true},  {"127.8.9.10", true},       {"::1", true},
      {"::ffff:127.0.0.1", true},  {"10.0.0.3", false},  {"10.0.0.10", false},       {"fd00::8", false},
      {"0.0.0.0", false},          {"192.168.1.1", false},
  };
  for (const auto& c : kCases) {
    INFO(c.peer);
    CHECK(HorovodPeerAllowed(ip::make_address(c.peer), nodes) == c.allowed);
  }
}

TEST_CASE("HorovodServerOptions: a client per rank and some, bodies as large as a value", "[horovod_store]") {
  http::ServerOptions small = HorovodServerOptions(4);
  CHECK(small.max_clients == 68);
  CHECK(small.max_body == HorovodStoreLimitsFor(4).max_value);
  CHECK(small.name == "horovod store");
  CHECK(HorovodServerOptions(100000).max_clients == 4096);
}

}  // namespace dlaunch::launcher
