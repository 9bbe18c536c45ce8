#include "rendezvous/host_lookup.hpp"

#include <sys/auxv.h>

#include <fstream>
#include <sstream>

namespace dlaunch::rendezvous {

namespace {

std::string_view Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

}  // namespace

std::string NsswitchHosts(std::string_view conf) {
  while (!conf.empty()) {
    size_t eol = conf.find('\n');
    std::string_view line = conf.substr(0, eol);
    conf = eol == std::string_view::npos ? std::string_view{} : conf.substr(eol + 1);
    line = line.substr(0, line.find('#'));
    line = Trim(line);
    if (!line.starts_with("hosts")) continue;
    std::string_view rest = Trim(line.substr(5));
    if (!rest.starts_with(':')) continue;
    // Runs of blanks become one space: the line is for a message.
    std::string out;
    for (char c : Trim(rest.substr(1))) {
      bool blank = c == ' ' || c == '\t';
      if (blank && (out.empty() || out.back() == ' ')) continue;
      out += blank ? ' ' : c;
    }
    return out;
  }
  return "";
}

std::string DescribeHostLookup(bool is_static, std::string_view conf) {
  std::string hosts = NsswitchHosts(conf);
  std::string how = hosts.empty() ? std::string("no hosts line, glibc's default") : hosts;
  if (is_static) return "looked up in /etc/hosts and DNS, then with getent through /etc/nsswitch.conf: " + how;
  return "looked up through /etc/nsswitch.conf: " + how;
}

std::string DescribeHostLookup() {
  std::ifstream in("/etc/nsswitch.conf");
  std::stringstream text;
  text << in.rdbuf();
  // A program started through a dynamic loader knows the loader's address.
  return DescribeHostLookup(getauxval(AT_BASE) == 0, text.str());
}

}  // namespace dlaunch::rendezvous
