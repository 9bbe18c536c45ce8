// Whether a host is this machine's loopback, decided one way for every mode: the
// head (which nodes it starts without ssh, which get --local-addr) and the agent
// and the coordinator daemon (whether the user's loopback token applies,
// launcher/modes/loopback_token.hpp). A loopback address is one in 127.0.0.0/8,
// or ::1 in any spelling, as boost::asio's is_loopback has it: a v4-mapped
// "::ffff:127.0.0.1" is not one.
#pragma once

#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>

namespace dlaunch::launcher {

// True for an address literal that is loopback: "127.0.0.2", "::1",
// "0:0:0:0:0:0:0:1". False for a name ("localhost"), a bracketed literal
// ("[::1]"), a short form ("127.1") and anything that is not an address. Pure.
bool IsLoopbackAddress(std::string_view host);

// True for a host that is this machine's loopback without asking a resolver:
// "localhost", a loopback address (IsLoopbackAddress), an IPv6 one in brackets
// ("[::1]"), or a dotted number that starts with "127." ("127.1", which
// inet_aton, and so ssh, reads as 127.0.0.1). False for every other name, one
// that begins "127." included ("127.example.com"). Pure.
bool IsLoopbackName(std::string_view host);

// True when `host` resolves, and to loopback addresses only: a name the
// resolver maps to 127.0.1.1 counts, "localhost" too. False when it does not
// resolve. Blocks on the resolver (getaddrinfo) on the calling thread.
bool IsLoopbackHost(boost::asio::io_context& io, const std::string& host);

}  // namespace dlaunch::launcher
