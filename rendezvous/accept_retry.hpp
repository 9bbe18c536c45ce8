// What an accept loop does when accept() fails: the coordinator's
// (rendezvous/server.cpp), the live socket's (launcher/live/live.cpp) and the
// HTTP server's (launcher/http/server.cpp) share it.
//   - The acceptor was closed: nothing more.
//   - The peer left between its SYN and accept(): accept again at once.
//   - Anything else (out of descriptors or memory): accept again after a wait
//     that backs off to 1 s (AcceptBackoff), saying so in one line, and once
//     more when accepting works again, rather than spinning on the error.
// Use from the thread that runs the io_context.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include "rendezvous/log_limit.hpp"

namespace dlaunch::rendezvous {

class AcceptRetry {
 public:
  // Gets what to say, for the caller to put its subject before
  // ("rendezvous 127.0.0.1:29500: " + what); may be empty (nothing said).
  using Say = std::function<void(const std::string& what)>;
  AcceptRetry(boost::asio::io_context& io, Say say);
  AcceptRetry(const AcceptRetry&) = delete;
  AcceptRetry& operator=(const AcceptRetry&) = delete;
  ~AcceptRetry();

  // accept() failed with `ec`: calls `accept` at once, later (on this object's
  // timer, never after this object is gone) or not at all, as above. "cannot
  // accept connections (WHY); retrying, backing off to 1s" is said once for a
  // run of failures.
  void Failed(const boost::system::error_code& ec, std::function<void()> accept);
  // accept() succeeded; after failures, says "accepting connections again".
  void Accepted();

 private:
  Say say_;
  AcceptBackoff backoff_;
  boost::asio::steady_timer timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace dlaunch::rendezvous
