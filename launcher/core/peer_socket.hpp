// Who is on the other end of a TCP connection that came from this machine. A
// server that cannot authenticate its clients (Horovod's gloo store) can still
// ask the kernel whose socket connected: its socket table answers one exact
// four-tuple query over NETLINK_SOCK_DIAG (what `ss` uses), with the uid that
// created the peer's socket. One query per connection; no scan of
// /proc/net/tcp. The kernel answers only for sockets of this network namespace:
// a peer in another one (a container's, another machine's) is not found.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "base/status.hpp"

namespace dlaunch::launcher {

// What the kernel knows of the socket on the other end of a connection.
struct PeerSocket {
  // The connection's four-tuple is in this network namespace's socket table:
  // the peer is on this machine (or in this namespace), whatever its address.
  bool here = false;
  // The uid that created it, while a process still holds it open; nullopt for
  // a remnant of a closed socket (TIME_WAIT, FIN_WAIT2: the kernel keeps no
  // owner for it, and reports uid 0) and when it is not here.
  std::optional<uint32_t> uid;
};

class SocketOwners {
 public:
  virtual ~SocketOwners() = default;
  // `ours` and `theirs`: an accepted connection's local and remote endpoints
  // (IPv4-mapped IPv6 counts as IPv4). Finds the socket on this machine whose
  // local end is `theirs` and remote end `ours`. Not here: a peer on another
  // machine or in another network namespace. Io naming the cause when the
  // kernel cannot be asked. Any thread; blocks on the kernel only.
  virtual Result<PeerSocket> OwnerOf(const boost::asio::ip::tcp::endpoint& ours,
                                     const boost::asio::ip::tcp::endpoint& theirs) = 0;
};

// The kernel's answer, over a netlink socket of each query's own.
class KernelSocketOwners final : public SocketOwners {
 public:
  Result<PeerSocket> OwnerOf(const boost::asio::ip::tcp::endpoint& ours,
                             const boost::asio::ip::tcp::endpoint& theirs) override;
};

// `a`, with an IPv4-mapped IPv6 address ("::ffff:10.0.0.1") as its IPv4 one. Pure.
boost::asio::ip::address PlainAddress(const boost::asio::ip::address& a);

// The addresses of this machine's interfaces (getifaddrs), IPv4-mapped ones as
// IPv4; empty when they cannot be read.
std::vector<boost::asio::ip::address> ThisMachineAddresses();

}  // namespace dlaunch::launcher
