#include "launcher/core/loopback.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace dlaunch::launcher {

bool IsLoopbackAddress(std::string_view host) {
  boost::system::error_code ec;
  boost::asio::ip::address address = boost::asio::ip::make_address(std::string(host), ec);
  return !ec && address.is_loopback();
}

bool IsLoopbackName(std::string_view host) {
  if (host == "localhost" || IsLoopbackAddress(host)) return true;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    std::string_view inner = host.substr(1, host.size() - 2);
    return inner.find(':') != std::string_view::npos && IsLoopbackAddress(inner);
  }
  // The short forms inet_aton reads ("127.1"): getaddrinfo takes them, so ssh
  // would reach this machine through them too.
  return host.starts_with("127.") && host.find_first_not_of("0123456789.") == std::string_view::npos;
}

bool IsLoopbackHost(boost::asio::io_context& io, const std::string& host) {
  boost::system::error_code ec;
  boost::asio::ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(host, "0", ec);
  if (ec || results.empty()) return false;
  for (const auto& entry : results)
    if (!entry.endpoint().address().is_loopback()) return false;
  return true;
}

}  // namespace dlaunch::launcher
