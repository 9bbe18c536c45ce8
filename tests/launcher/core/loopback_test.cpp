// One loopback check for every mode (launcher/core/loopback.hpp): the literal
// test, the name test the head uses to skip ssh, and the resolving one behind the
// loopback token.
#include "launcher/core/loopback.hpp"

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

namespace dlaunch::launcher {

TEST_CASE("loopback: an address literal is loopback when it is in 127/8 or is ::1", "[loopback]") {
  for (const char* h : {"127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "0:0:0:0:0:0:0:1", "0::1"})
    CHECK(IsLoopbackAddress(h));
  // Names, brackets and short forms are not literals; the head passes only a
  // literal as --local-addr.
  for (const char* h : {"localhost", "[::1]", "127.1", "10.0.0.1", "0.0.0.0", "::", "fe80::1", "128.0.0.1", "",
                        "::ffff:127.0.0.1", "127.0.0.1:22", "node1"})
    CHECK_FALSE(IsLoopbackAddress(h));
}

TEST_CASE("loopback: the names the head starts without ssh", "[loopback]") {
  for (const char* h :
       {"localhost", "127.0.0.1", "127.0.0.2", "::1", "[::1]", "[0:0:0:0:0:0:0:1]", "0::1", "127.1", "127.0.1"})
    CHECK(IsLoopbackName(h));
  for (const char* h : {"node1", "10.0.0.1", "127", "localhost2", "my127.0.0.1", "LOCALHOST.example", "[127.0.0.1]",
                        "[fe80::1]", "[::1", "::1]", "[]", "", "::ffff:127.0.0.1", "[::ffff:127.0.0.1]"})
    CHECK_FALSE(IsLoopbackName(h));
}

TEST_CASE("loopback: a host name that begins with 127. is a name, reached through ssh", "[loopback]") {
  // The head's copy (remote.cpp) took any "127." prefix, so a node named
  // 127.example.com ran on the head itself.
  CHECK_FALSE(IsLoopbackName("127.example.com"));
  CHECK_FALSE(IsLoopbackName("127.0.0.1.nip.io"));
  CHECK(IsLoopbackName("127.0.0.1."));  // digits and dots only: loopback, as before
}

TEST_CASE("loopback: a host whose every address is loopback, by the resolver", "[loopback]") {
  boost::asio::io_context io;
  CHECK(IsLoopbackHost(io, "127.0.0.1"));
  CHECK(IsLoopbackHost(io, "127.0.0.9"));
  CHECK(IsLoopbackHost(io, "::1"));
  CHECK(IsLoopbackHost(io, "localhost"));
  CHECK_FALSE(IsLoopbackHost(io, "10.0.0.1"));
  CHECK_FALSE(IsLoopbackHost(io, "0.0.0.0"));
  CHECK_FALSE(IsLoopbackHost(io, "::ffff:127.0.0.1"));  // as IsLoopbackAddress: not loopback
}

}  // namespace dlaunch::launcher
