#include "launcher/metrics/metrics_service.hpp"

#include <boost/asio/ip/address.hpp>
#include <fmt/format.h>

namespace dlaunch::launcher {

namespace asio = boost::asio;

MetricsService::MetricsService(asio::io_context& io, MetricsPages pages) : pages_(std::move(pages)), lag_(io) {}

std::string MetricsService::address() const { return http::FormatEndpoint(server_->endpoint()); }
int MetricsService::port() const { return server_->endpoint().port(); }

http::Response MetricsService::Handle(const http::Request& request) const {
  MetricsAnswer a = AnswerMetricsRequest(request.method, request.target, pages_, lag_.Lag(MetricsClock::now()));
  http::Response r;
  r.status = static_cast<unsigned>(a.status);
  r.content_type = a.content_type;
  r.body = std::move(a.body);  // the server sends HEAD the GET's length without the body
  r.allow = std::move(a.allow);
  return r;
}

Result<std::unique_ptr<MetricsService>> StartMetricsService(asio::io_context& io,
                                                            const std::optional<rendezvous::HostPort>& addr,
                                                            MetricsPages pages,
                                                            std::function<void(const std::string&)> say,
                                                            EventLog* events) {
  if (!addr) return std::unique_ptr<MetricsService>();
  boost::system::error_code ec;
  asio::ip::address ip = asio::ip::make_address(addr->host, ec);  // Decide checked it (metrics_addr.hpp)
  std::string asked = addr->ToString();
  if (ec) return Status::InvalidArgument(fmt::format("--metrics-addr {}: not an IP address", asked));
  auto service = std::make_unique<MetricsService>(io, std::move(pages));
  MetricsService* s = service.get();
  // Only GET and HEAD of three paths; the pages read memory and /proc/self, and
  // never wait on a worker or a node.
  http::Handler handler = [s](const http::Request& request) { return s->Handle(request); };
  http::ServerOptions options;
  options.name = "metrics";
  options.max_clients = 32;  // Prometheus and two probes; a crowd is evicted (server.hpp)
  options.max_body = 0;      // GET and HEAD carry none
  auto server = http::Server::Start(io, asio::ip::tcp::endpoint(ip, static_cast<unsigned short>(addr->port)),
                                    std::move(handler), say, options);
  if (!server.ok()) {
    // The server's line names itself and the address; the user typed the flag.
    std::string m = server.status().message();
    size_t open = m.rfind(" (");
    std::string why = open != std::string::npos && m.back() == ')' ? m.substr(open + 2, m.size() - open - 3) : m;
    return Status::InvalidArgument(fmt::format("--metrics-addr {}: cannot listen ({})", asked, why));
  }
  service->server_ = std::move(*server);
  service->lag_.Start();
  if (say) say(fmt::format("metrics on http://{}/metrics (and /healthz, /readyz)", service->address()));
  if (events != nullptr)
    events->Emit("metrics_listening", {{"address", service->address()}, {"port", service->port()}});
  return service;
}

}  // namespace dlaunch::launcher
