// Who may use the Horovod store (horovod_server.hpp). Horovod's client sends no
// secret, so the store judges the connection itself:
//   - from this machine (the kernel has its socket, or its address is
//     loopback or one of this machine's): only a socket
//     of the job's user, as the kernel says (SocketOwners). Another local user
//     is refused, and so is a peer whose socket cannot be found (closed
//     already) or when the kernel cannot be asked;
//   - from elsewhere: only the job's nodes' addresses, when dlaunch knows them.
//     In the static form without a node list it does not, and any remote peer
//     is served (the caller says so once).
// Not covered: a local peer whose socket belongs to another uid on the job's
// behalf (a sidecar proxy such as Istio's envoy, which enters from 127.0.0.6 as
// its own uid; docker-proxy, which connects from the host's side as root) is
// refused unless that uid is the job's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "launcher/core/peer_socket.hpp"

namespace dlaunch::launcher {

struct HorovodPeerRules {
  uint32_t uid = 0;                             // the job's user: dlaunch's effective uid, the workers'
  std::vector<boost::asio::ip::address> local;  // this machine's addresses (loopback counts without them)
  // The job's nodes' addresses; nullopt: unknown, so any remote peer.
  std::optional<std::vector<boost::asio::ip::address>> nodes;
};

// Empty when the peer at `theirs`, connected to `ours`, may use the store;
// otherwise why not, for the refusal line ("not an address of the job's
// nodes", "a socket of uid 65534, not the job's uid 0"). Asks `owners` once
// for every peer: the kernel, not the address, says whether it is on this
// machine. Call on the server's thread.
std::string HorovodPeerRefusal(const HorovodPeerRules& rules, SocketOwners& owners,
                               const boost::asio::ip::tcp::endpoint& ours,
                               const boost::asio::ip::tcp::endpoint& theirs);

}  // namespace dlaunch::launcher
