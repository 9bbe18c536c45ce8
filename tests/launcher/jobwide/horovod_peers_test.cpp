#include "launcher/jobwide/horovod_peers.hpp"

#include <map>
#include <utility>

#include <catch2/catch.hpp>

namespace dlaunch::launcher {
namespace {

namespace ip = boost::asio::ip;
using tcp = ip::tcp;

// Owners by the peer's address: the uid, nothing (no socket found), or a failure.
class FakeOwners : public SocketOwners {
 public:
  std::map<std::string, Result<std::optional<uint32_t>>> by_address;
  int asked = 0;
  Result<std::optional<uint32_t>> OwnerOf(const tcp::endpoint&, const tcp::endpoint& theirs) override {
    ++asked;
    auto it = by_address.find(PlainAddress(theirs.address()).to_string());
    return it == by_address.end() ? Result<std::optional<uint32_t>>(std::optional<uint32_t>()) : it->second;
  }
};

tcp::endpoint At(const char* address, unsigned short port = 40000) { return {ip::make_address(address), port}; }

TEST_CASE("Horovod peers: this machine's by socket owner, others by node address", "[horovod_store]") {
  HorovodPeerRules rules;
  rules.uid = 1000;
  rules.local = {ip::make_address("10.0.0.1"), ip::make_address("192.168.5.1"), ip::make_address("fd00::1")};
  rules.nodes = std::vector<ip::address>{ip::make_address("10.0.0.1"), ip::make_address("10.0.0.2"),
                                         ip::make_address("fd00::7")};
  FakeOwners owners;
  owners.by_address.emplace("127.0.0.1", std::optional<uint32_t>(1000));
  owners.by_address.emplace("127.0.0.6", std::optional<uint32_t>(1337));  // a sidecar's own uid
  owners.by_address.emplace("::1", std::optional<uint32_t>(1000));
  owners.by_address.emplace("10.0.0.1", std::optional<uint32_t>(65534));
  owners.by_address.emplace("192.168.5.1", std::optional<uint32_t>(1000));
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
      {"10.0.0.2", "", false},  // another node
      {"::ffff:10.0.0.2", "", false},
      {"fd00::7", "", false},
      {"10.0.0.3", "not an address of the job's nodes", false},
      {"fd00::8", "not an address of the job's nodes", false},
      {"192.168.1.1", "not an address of the job's nodes", false},
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
    CHECK(HorovodPeerRefusal(rules, owners, store, At("10.0.0.1")) == "a socket of uid 65534, not the job's uid 1000");
  }
}

}  // namespace
}  // namespace dlaunch::launcher
