#include "rendezvous/accept_retry.hpp"

#include <chrono>
#include <string>
#include <system_error>
#include <vector>

#include <boost/asio/error.hpp>
#include <catch2/catch.hpp>

using namespace dlaunch::rendezvous;
using namespace std::chrono_literals;

namespace {

boost::system::error_code TooManyFiles() {
  return boost::system::errc::make_error_code(boost::system::errc::too_many_files_open);
}

}  // namespace

TEST_CASE("accept retry: a closed acceptor stops, an aborted peer accepts again at once", "[accept_retry]") {
  boost::asio::io_context io;
  std::vector<std::string> lines;
  AcceptRetry retry(io, [&](const std::string& what) { lines.push_back(what); });
  int accepts = 0;
  retry.Failed(boost::asio::error::operation_aborted, [&] { ++accepts; });
  CHECK(accepts == 0);
  retry.Failed(boost::asio::error::connection_aborted, [&] { ++accepts; });
  CHECK(accepts == 1);
  io.run_for(50ms);
  CHECK(accepts == 1);
  CHECK(lines.empty());
}

TEST_CASE("accept retry: a full descriptor table waits, says so once, and says when it accepts again",
          "[accept_retry]") {
  boost::asio::io_context io;
  std::vector<std::string> lines;
  AcceptRetry retry(io, [&](const std::string& what) { lines.push_back(what); });
  int accepts = 0;
  auto start = std::chrono::steady_clock::now();
  retry.Failed(TooManyFiles(), [&] { ++accepts; });
  CHECK(accepts == 0);  // not at once: a spin on EMFILE would take a core
  for (int i = 0; i < 300 && accepts == 0; ++i) io.run_one_for(10ms);
  REQUIRE(accepts == 1);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  io.restart();  // it ran out of work after the first wait
  retry.Failed(TooManyFiles(), [&] { ++accepts; });
  for (int i = 0; i < 300 && accepts == 1; ++i) io.run_one_for(10ms);
  REQUIRE(accepts == 2);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "cannot accept connections (Too many open files); retrying, backing off to 1s");
  retry.Accepted();
  retry.Accepted();
  REQUIRE(lines.size() == 2);
  CHECK(lines[1] == "accepting connections again");
}

TEST_CASE("accept retry: a wait pending when its owner goes never accepts", "[accept_retry]") {
  boost::asio::io_context io;
  int accepts = 0;
  {
    AcceptRetry retry(io, nullptr);  // no lines: nothing said, nothing fails
    retry.Failed(TooManyFiles(), [&] { ++accepts; });
  }
  io.run_for(1500ms);
  CHECK(accepts == 0);
}
