// A loopback port with no listener, for the rendezvous tests on real sockets
// (agent_session_test, connect_now_test).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace dlaunch::testing {

// A port of 127.0.0.1 that was free a moment ago and has no listener now.
inline int ClosedPort(boost::asio::io_context& io) {
  boost::asio::ip::tcp::acceptor probe(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  int port = probe.local_endpoint().port();
  probe.close();
  return port;
}

}  // namespace dlaunch::testing
