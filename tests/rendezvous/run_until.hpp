// Runs an io_context until a test's condition holds, within a bound: the
// rendezvous tests on real sockets (server_test, agent_session_test) share it.
#pragma once

#include <chrono>

#include <boost/asio/io_context.hpp>

namespace dlaunch::testing {

// Runs `io` until `done()` or `limit`; returns done().
template <typename F>
bool RunUntil(boost::asio::io_context& io, F done, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  io.restart();
  while (!done() && std::chrono::steady_clock::now() < deadline) io.run_one_for(std::chrono::milliseconds(20));
  return done();
}

}  // namespace dlaunch::testing
