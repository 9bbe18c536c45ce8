#include "launcher/jobwide/horovod_peers.hpp"

#include <map>
#include <utility>

#include <catch2/catch.hpp>

namespace dlaunch::launcher {
namespace {

namespace ip = boost::asio::ip;
using tcp = ip::tcp;

// Sockets by the peer's address: owned by a uid, a remnant (here, no owner),
// not here (absent from the map), or a failure.
class FakeOwners : public SocketOwners {
 public:
  std::map<std::string, Result<PeerSocket>> by_address;
  int asked = 0;
  Result<PeerSocket> OwnerOf(const tcp::endpoint&, const tcp::endpoint& theirs) override {
    ++asked;
    auto it = by_address.find(PlainAddress(theirs.address()).to_string());
    return it == by_address.end() ? Result<PeerSocket>(PeerSocket{}) : it->second;
  }
};
PeerSocket Owned(uint32_t uid) { return PeerSocket{true, uid}; }

tcp::endpoint At(const char* address, unsigned short port = 40000) { return {ip::make_address(address), port}; }

TEST_CASE("Horovod peers: this machine's by socket owner, others by node address", "[horovod_store]") {
  HorovodPeerRules rules;
  rules.uid = 1000;
  rules.local = {ip::make_address("10.0.0.1"), ip::make_address("192.168.5.1"), ip::make_address("fd00::1")};
  rules.nodes =
      std::vector<ip::address>{ip::make_address("10.0.0.1"), ip::make_address("10.0.0.2"), ip::make_address("fd00::7")};
  FakeOwners owners;
  owners.by_address.emplace("127.0.0.1", Owned(1000));
  owners.by_address.emplace("127.0.0.6", Owned(1337));  // a sidecar's own uid
  owners.by_address.emplace("::1", Owned(1000));
  owners.by_address.emplace("10.0.0.1", Owned(65534));
  owners.by_address.emplace("192.168.5.1", Owned(1000));
  owners.by_address.emplace("127.0.0.3", PeerSocket{true, std::nullopt});  // closed: a remnant
  // An address this machine took after the store started: not in `local`, but the kernel has the socket.
  owners.by_address.emplace("10.77.0.9", Owned(65534));
  owners.by_address.emplace("10.77.0.10", Owned(1000));
  owners.by_address.emplace("127.0.0.9", Status::Io("sock_diag: cannot open a netlink socket (Permission denied)"));
  const tcp::endpoint store = At("10.0.0.1", 29501);

  static const struct {
    const char* peer;
    const char* refusal;  // empty: served
    bool asks_kernel;
  } kCases[] = {
      {"127.0.0.1", "", true},
      {"::ffff:127.0.0.1", "", true},
      {"::1", "", true},
      {"192.168.5.1", "", true},  // another address of this machine, the job's user
      {"127.0.0.6", "a socket of uid 1337, not the job's uid 1000", true},
      {"10.0.0.1", "a socket of uid 65534, not the job's uid 1000", true},  // a node address, but this machine's
      {"::ffff:10.0.0.1", "a socket of uid 65534, not the job's uid 1000", true},
      {"127.0.0.2", "from this machine, but no open socket of it was found", true},
      {"127.0.0.9", "cannot tell whose socket it is: sock_diag: cannot open a netlink socket (Permission denied)",
       true},
      {"fd00::1", "from this machine, but no open socket of it was found", true},
      {"127.0.0.3", "from this machine, but no open socket of it was found", true},
      {"10.77.0.9", "a socket of uid 65534, not the job's uid 1000", true},
      {"10.77.0.10", "", true},
      {"10.0.0.2", "", true},  // another node
      {"::ffff:10.0.0.2", "", true},
      {"fd00::7", "", true},
      {"10.0.0.3", "not an address of the job's nodes", true},
      {"fd00::8", "not an address of the job's nodes", true},
      {"192.168.1.1", "not an address of the job's nodes", true},
  };
  for (const auto& c : kCases) {
    INFO(c.peer);
    owners.asked = 0;
    CHECK(HorovodPeerRefusal(rules, owners, store, At(c.peer)) == c.refusal);
    CHECK(owners.asked == (c.asks_kernel ? 1 : 0));
  }

  SECTION("the store's own address counts as this machine's even when getifaddrs missed it") {
    rules.local.clear();
    CHECK(HorovodPeerRefusal(rules, owners, store, At("10.0.0.1")) == "a socket of uid 65534, not the job's uid 1000");
  }
  SECTION("nodes unknown (the static form without a node list): any remote peer, but local ones by owner") {
    rules.nodes.reset();
    CHECK(HorovodPeerRefusal(rules, owners, store, At("10.0.0.3")).empty());
    CHECK(HorovodPeerRefusal(rules, owners, store, At("10.77.0.9")) == "a socket of uid 65534, not the job's uid 1000");
    CHECK(HorovodPeerRefusal(rules, owners, store, At("10.0.0.1")) == "a socket of uid 65534, not the job's uid 1000");
  }
}

}  // namespace
}  // namespace dlaunch::launcher
