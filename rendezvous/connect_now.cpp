#include "rendezvous/connect_now.hpp"

#include <cerrno>

#include <sys/socket.h>
#include <unistd.h>

namespace dlaunch::rendezvous {

StartedConnect StartConnect(const boost::asio::ip::tcp::endpoint& to) {
  int fd = ::socket(to.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
  if (fd < 0) return {-1, errno};
  // Non-blocking: connect(2) returns at once, so no signal interrupts it.
  int error = ::connect(fd, to.data(), static_cast<socklen_t>(to.size())) == 0 ? 0 : errno;
  if (error == EINPROGRESS) error = ConnectError(fd);  // a loopback refusal is known by now
  if (error != 0) {
    ::close(fd);
    return {-1, error};
  }
  return {fd, 0};
}

int ConnectError(int fd) {
  int error = 0;
  socklen_t size = sizeof error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) return errno;
  return error;
}

}  // namespace dlaunch::rendezvous
