// Host names through the machine's own name service, for a static dlaunch.
//
// A static glibc resolves only with the services it has built in (/etc/hosts
// and DNS: KeepHostLookupsBuiltIn, system.hpp), since loading an NSS module
// built for another glibc can crash it. Names that only a module knows
// (myhostname's own host name, sss and LDAP, NIS, mdns) are then asked of
// `getent ahosts`, a dynamically linked program of glibc's own (libc-bin) that
// reads /etc/nsswitch.conf as every program on the machine does. It runs in a
// process of its own, so no module is ever loaded into dlaunch.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace dlaunch::launcher {

// The addresses in `getent ahosts` output, in its order, each once: the first
// field of each line ("10.0.0.5      STREAM node-3"), kept when it parses as an
// IPv4 or IPv6 address. Anything else is skipped.
std::vector<std::string> ParseGetentAhosts(std::string_view text);

// The database to ask for an address family: ahostsv4 for AF_INET, ahostsv6
// for AF_INET6, ahosts for any other.
const char* GetentDatabase(int family);

// Runs `getent` (the program at `getent_path`) with DATABASE NAME, no shell,
// stdin and stderr on /dev/null, and returns the addresses it printed (at
// most 64 KiB of output is read). NotFound when it printed none (getent exits
// 2 for an unknown name), Io when it could not be run. Waits for it to end;
// its exit status is not needed, as the launcher's reaper may collect it first.
Result<std::vector<std::string>> GetentAhosts(const std::string& getent_path, const std::string& name, int family);

// Where glibc's getent is: /usr/bin/getent, else /bin/getent; "" when neither.
std::string FindGetent();

// Answers (an unknown name's too) kept for `ttl`, so that an agent retrying a
// name every 100 ms starts a getent once in a while, not at every attempt. At
// most kMaxEntries names; the oldest go first. Safe to call from any thread.
class GetentCache {
 public:
  using Clock = std::chrono::steady_clock;
  using Run = std::function<Result<std::vector<std::string>>(const std::string& name, int family)>;
  static constexpr size_t kMaxEntries = 64;

  GetentCache(Run run, Clock::duration ttl) : run_(std::move(run)), ttl_(ttl) {}
  Result<std::vector<std::string>> Lookup(const std::string& name, int family, Clock::time_point now);

 private:
  struct Entry {
    Result<std::vector<std::string>> answer;
    Clock::time_point at;
  };
  Run run_;
  Clock::duration ttl_;
  std::mutex mu_;
  std::map<std::pair<std::string, int>, Entry> entries_;
};

}  // namespace dlaunch::launcher
