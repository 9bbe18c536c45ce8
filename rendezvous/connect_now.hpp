// The first half of a non-blocking TCP connect, with what it already knows.
//
// An agent that starts before its host tries again and again to connect to a
// port nobody listens on. Through Asio each refused try is a socket registered
// with epoll, a deadline armed and disarmed, a pass of the event loop for the
// error that was there all along, and the descriptor removed again. On loopback,
// and to a machine that answers at once, the kernel knows the refusal before
// connect(2) returns, so StartConnect asks for it there (SO_ERROR): four system
// calls of its own, and seven in all for the try where Asio made fourteen. Only
// a connect still in flight is handed to the event loop.
#pragma once

#include <boost/asio/ip/tcp.hpp>

namespace dlaunch::rendezvous {

struct StartedConnect {
  // An open, non-blocking, close-on-exec socket whose connect is in flight or
  // done (wait for it to be writable, then ask SO_ERROR); -1 when the connect
  // already failed. The caller owns it.
  int fd = -1;
  // Why it failed (errno: ECONNREFUSED, EMFILE, ENETUNREACH...); 0 with an fd.
  int error = 0;
};

StartedConnect StartConnect(const boost::asio::ip::tcp::endpoint& to);

// The pending error of a socket whose connect was in flight (SO_ERROR; 0 when
// it connected).
int ConnectError(int fd);

}  // namespace dlaunch::rendezvous
