// getaddrinfo for the static-pie dlaunch (launcher/CMakeLists.txt links this
// file into it with -Wl,--wrap=getaddrinfo, so every lookup, Asio's included,
// comes here). glibc's own lookup runs first, with its built-in /etc/hosts and
// DNS (KeepHostLookupsBuiltIn); a name they do not know is then asked of
// `getent ahosts`, which reads /etc/nsswitch.conf with the system's own glibc
// and modules (launcher/core/getent_hosts.hpp). Written by hand because no
// library resolves through another program; the answer is built from glibc's
// own numeric lookups, so glibc's freeaddrinfo frees it.
#include <netdb.h>
#include <sys/socket.h>

#include <string>

#include "launcher/core/getent_hosts.hpp"

extern "C" {
int __real_getaddrinfo(const char* node, const char* service, const addrinfo* hints, addrinfo** res);

int __wrap_getaddrinfo(const char* node, const char* service, const addrinfo* hints, addrinfo** res) {
  int rc = __real_getaddrinfo(node, service, hints, res);
  // Only a name that the built-in services did not find: not an address, not
  // a numeric-only request, not a failure of the request itself.
  bool not_found = rc == EAI_NONAME || rc == EAI_NODATA || rc == EAI_AGAIN || rc == EAI_FAIL || rc == EAI_ADDRFAMILY;
  if (!not_found || node == nullptr || *node == '\0' || (hints != nullptr && (hints->ai_flags & AI_NUMERICHOST) != 0))
    return rc;
  static const std::string getent = dlaunch::launcher::FindGetent();
  if (getent.empty()) return rc;
  // An agent waiting for its host looks the name up at every attempt.
  static dlaunch::launcher::GetentCache cache(
      [](const std::string& name, int family) { return dlaunch::launcher::GetentAhosts(getent, name, family); },
      std::chrono::seconds(5));
  int family = hints != nullptr ? hints->ai_family : AF_UNSPEC;
  dlaunch::Result<std::vector<std::string>> addrs =
      cache.Lookup(node, family, dlaunch::launcher::GetentCache::Clock::now());
  if (!addrs.ok()) return rc;
  addrinfo numeric{};
  if (hints != nullptr) numeric = *hints;
  numeric.ai_flags = (numeric.ai_flags & ~AI_CANONNAME) | AI_NUMERICHOST;
  addrinfo* head = nullptr;
  addrinfo** tail = &head;
  for (const std::string& addr : *addrs) {
    addrinfo* one = nullptr;
    if (__real_getaddrinfo(addr.c_str(), service, &numeric, &one) != 0 || one == nullptr) continue;
    *tail = one;
    while (*tail != nullptr) tail = &(*tail)->ai_next;
  }
  if (head == nullptr) return rc;
  *res = head;
  return 0;
}
}
