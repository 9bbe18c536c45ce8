#include "launcher/config/metrics_addr.hpp"

#include <boost/asio/ip/address.hpp>
#include <fmt/format.h>

namespace dlaunch::launcher {

Result<rendezvous::HostPort> ParseMetricsAddr(const std::string& text, const std::string& what) {
  auto bad = [&] {
    return Status::InvalidArgument(
        fmt::format("{}{}: expected ADDR:PORT or PORT (ADDR an IP address or localhost; PORT 0 to 65535, 0: any free "
                    "port)",
                    what, text));
  };
  rendezvous::HostPort hp{"127.0.0.1", 0};
  std::string port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close == 1 || close + 1 >= text.size() || text[close + 1] != ':') return bad();
    hp.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon != std::string::npos && text.find(':') != colon) return bad();  // a bare IPv6 needs [ ]
    if (colon != std::string::npos && colon > 0) hp.host = text.substr(0, colon);
    port = colon == std::string::npos ? text : text.substr(colon + 1);
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return bad();
  hp.port = std::stoi(port);
  if (hp.port > 65535) return bad();
  // An address, not a name: a lookup could block, and a name may have several.
  if (hp.host == "localhost") hp.host = "127.0.0.1";
  boost::system::error_code ec;
  boost::asio::ip::address a = boost::asio::ip::make_address(hp.host, ec);
  if (ec || (text[0] == '[') != a.is_v6()) return bad();
  return hp;
}

Result<std::optional<rendezvous::HostPort>> MetricsAddrFor(const std::string& flag, const envmap::EnvMap& env) {
  std::optional<rendezvous::HostPort> none;
  if (!flag.empty()) {
    Result<rendezvous::HostPort> hp = ParseMetricsAddr(flag, "--metrics-addr ");
    if (!hp.ok()) return hp.status();
    return std::optional<rendezvous::HostPort>(*hp);
  }
  auto it = env.find(kMetricsAddrEnvVar);
  if (it == env.end() || it->second.empty()) return none;
  Result<rendezvous::HostPort> hp = ParseMetricsAddr(it->second, std::string(kMetricsAddrEnvVar) + "=");
  if (!hp.ok()) return hp.status();
  return std::optional<rendezvous::HostPort>(*hp);
}

}  // namespace dlaunch::launcher
