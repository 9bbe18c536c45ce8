#include "launcher/core/std_fds.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace dlaunch::launcher {

Status OpenClosedStandardFds(const char* null_path) {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    // Not close-on-exec: it stands for the descriptor the children inherit.
    int null = open(null_path, O_RDWR);
    if (null < 0) return Status::Io(fmt::format("{}: cannot open ({})", null_path, std::strerror(errno)));
    // The ones below are open, so open() gave `fd` itself; another thread
    // opening at the same moment is the only way it could not have.
    if (null != fd) {
      dup2(null, fd);
      close(null);
    }
  }
  return Status::Ok();
}

void SetStandardFds(const int (&from)[3]) {
  int src[3] = {from[0], from[1], from[2]};
  for (int i = 0; i < 3; ++i)
    if (src[i] >= 0 && src[i] <= 2 && src[i] != i) src[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 3);
  for (int i = 0; i < 3; ++i) {
    if (src[i] < 0) continue;
    if (src[i] == i)
      fcntl(i, F_SETFD, 0);
    else
      dup2(src[i], i);
  }
}

}  // namespace dlaunch::launcher
