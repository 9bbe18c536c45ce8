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
  // A process of this machine may send from any of its addresses, the job's
  // node address included, so the address alone says nothing about who it is.
  const bool here = peer.is_loopback() || peer == PlainAddress(ours.address()) || listed(rules.local);
  if (here) {
    Result<std::optional<uint32_t>> owner = owners.OwnerOf(ours, theirs);
    if (!owner.ok()) return fmt::format("cannot tell whose socket it is: {}", owner.status().message());
    if (!owner->has_value()) return "from this machine, but no open socket of it was found";
    if (**owner != rules.uid) return fmt::format("a socket of uid {}, not the job's uid {}", **owner, rules.uid);
    return "";
  }
  if (rules.nodes && !listed(*rules.nodes)) return "not an address of the job's nodes";
  return "";
}

}  // namespace dlaunch::launcher
