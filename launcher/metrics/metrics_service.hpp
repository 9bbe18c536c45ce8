// --metrics-addr's HTTP side: serves a dlaunch's MetricsPages
// (launcher/metrics/metrics.hpp) with the project's bounded HTTP server
// (launcher/http/server.hpp) on the event loop, and runs the loop-lag watchdog
// behind /healthz. Every call happens on the event loop's thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "base/status.hpp"
#include "launcher/core/events.hpp"
#include "launcher/metrics/metrics.hpp"
#include "launcher/http/server.hpp"
#include "rendezvous/connection.hpp"

namespace dlaunch::launcher {

class MetricsService {
 public:
  MetricsService(boost::asio::io_context& io, MetricsPages pages);
  // "ADDR:PORT" it listens on (the chosen port when 0 was asked for).
  std::string address() const;
  int port() const;
  // One request's answer (AnswerMetricsRequest with the loop's lag now); a HEAD gets no body.
  http::Response Handle(const http::Request& request) const;

 private:
  friend Result<std::unique_ptr<MetricsService>> StartMetricsService(boost::asio::io_context&,
                                                                     const std::optional<rendezvous::HostPort>&,
                                                                     MetricsPages,
                                                                     std::function<void(const std::string&)>,
                                                                     EventLog*);
  MetricsPages pages_;
  LoopLag lag_;
  std::unique_ptr<http::Server> server_;
};

// Null when `addr` is none. Else listens on it, says "metrics on
// http://ADDR:PORT/metrics (and /healthz, /readyz)" through `say`, and emits
// metrics_listening on `events` (when not null). InvalidArgument
// "--metrics-addr ADDR:PORT: cannot listen (why)" when it cannot bind.
// `say` also gets the server's rate-limited refusal lines.
Result<std::unique_ptr<MetricsService>> StartMetricsService(boost::asio::io_context& io,
                                                            const std::optional<rendezvous::HostPort>& addr,
                                                            MetricsPages pages,
                                                            std::function<void(const std::string&)> say,
                                                            EventLog* events);

}  // namespace dlaunch::launcher
