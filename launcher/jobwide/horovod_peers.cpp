#include "launcher/jobwide/horovod_peers.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace dlaunch::launcher {

std::string HorovodPeerRefusal(const HorovodPeerRules& rules, SocketOwners& owners,
                               const boost::asio::ip::tcp::endpoint& ours,
                               const boost::asio::ip::tcp::endpoint& theirs) {
  const boost::asio::ip::address peer = PlainAddress(theirs.address());
  auto listed = [&peer](const std::vector<boost::asio::ip::address>& in) {
    return std::find(in.begin(), in.end(), peer) != in.end();
  };
  // The kernel is asked for every peer, not only those whose address looks
  // local: a process of this machine may send from any address it holds, the
  // job's node address included, or from one added after the store started
  // (a rotated IPv6 temporary address, a new bridge), so the address alone says
  // nothing about who it is. Only a connection the kernel does not have here
  // comes from another machine.
  Result<PeerSocket> socket = owners.OwnerOf(ours, theirs);
  if (!socket.ok()) return fmt::format("cannot tell whose socket it is: {}", socket.status().message());
  const bool looks_here = peer.is_loopback() || peer == PlainAddress(ours.address()) || listed(rules.local);
  if (socket->here || looks_here) {
    if (!socket->uid) return "from this machine, but no open socket of it was found";
    if (*socket->uid != rules.uid)
      return fmt::format("a socket of uid {}, not the job's uid {}", *socket->uid, rules.uid);
    return "";
  }
  if (rules.nodes && !listed(*rules.nodes)) return "not an address of the job's nodes";
  return "";
}

}  // namespace dlaunch::launcher
