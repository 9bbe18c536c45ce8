#include "rendezvous/host_lookup.hpp"

#include <catch2/catch.hpp>

namespace dlaunch::rendezvous {

TEST_CASE("host lookup: the hosts line of nsswitch.conf, as a message shows it", "[host_lookup]") {
  CHECK(NsswitchHosts("passwd: files\nhosts:\tfiles  myhostname   dns\n") == "files myhostname dns");
  CHECK(NsswitchHosts("hosts: files mdns4_minimal [NOTFOUND=return] dns # comment\n") ==
        "files mdns4_minimal [NOTFOUND=return] dns");
  CHECK(NsswitchHosts("# hosts: nis\nhosts: files") == "files");
  CHECK(NsswitchHosts("hostsfoo: x\nnetworks: files\n").empty());
  CHECK(NsswitchHosts("").empty());
}

TEST_CASE("host lookup: how a dynamic and a static program look names up", "[host_lookup]") {
  CHECK(DescribeHostLookup(false, "hosts: files myhostname\n") ==
        "looked up through /etc/nsswitch.conf: files myhostname");
  CHECK(DescribeHostLookup(true, "hosts: files myhostname\n") ==
        "looked up in /etc/hosts and DNS, then with getent through /etc/nsswitch.conf: files myhostname");
  CHECK(DescribeHostLookup(true, "") ==
        "looked up in /etc/hosts and DNS, then with getent through /etc/nsswitch.conf: no hosts line, glibc's default");
  // The unit tests are never linked statically.
  CHECK(DescribeHostLookup().starts_with("looked up through /etc/nsswitch.conf: "));
}

}  // namespace dlaunch::rendezvous
