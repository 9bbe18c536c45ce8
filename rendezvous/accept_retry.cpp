#include "rendezvous/accept_retry.hpp"

#include <boost/asio/error.hpp>
#include <fmt/format.h>

namespace dlaunch::rendezvous {

AcceptRetry::AcceptRetry(boost::asio::io_context& io, Say say) : say_(std::move(say)), timer_(io) {}

// A wait already queued when the timer goes still runs, with success: it checks
// that this object lives.
AcceptRetry::~AcceptRetry() { *alive_ = false; }

void AcceptRetry::Failed(const boost::system::error_code& ec, std::function<void()> accept) {
  namespace error = boost::asio::error;
  if (ec == error::operation_aborted) return;  // the acceptor was closed
  if (ec == error::connection_aborted) return accept();
  AcceptBackoff::Retry retry = backoff_.Failed(AcceptBackoff::Clock::now());
  if (retry.say && say_) say_(fmt::format("cannot accept connections ({}); retrying, backing off to 1s", ec.message()));
  timer_.expires_after(retry.wait);
  timer_.async_wait([alive = alive_, accept = std::move(accept)](boost::system::error_code e) {
    if (!e && *alive) accept();
  });
}

void AcceptRetry::Accepted() {
  if (backoff_.Accepted() && say_) say_("accepting connections again");
}

}  // namespace dlaunch::rendezvous
