#include "launcher/core/small_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace dlaunch::launcher {
namespace {

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

}  // namespace

Result<std::optional<std::string>> ReadFilePrefix(const std::string& path, std::size_t limit) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    if (errno == ELOOP) return Status::InvalidArgument("a symbolic link, not a regular file");
    return Status::Io(fmt::format("cannot open ({})", std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return Status::Io(fmt::format("cannot stat ({})", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return Status::InvalidArgument(fmt::format("{}, not a regular file", KindOf(st.st_mode)));
  }
  std::string text(limit, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    ssize_t n = read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return Status::Io(fmt::format("cannot read ({})", std::strerror(err)));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  close(fd);
  text.resize(got);
  return std::optional<std::string>(std::move(text));
}

Result<std::optional<std::string>> ReadSmallFile(const std::string& path, std::size_t max) {
  Result<std::optional<std::string>> text = ReadFilePrefix(path, max + 1);
  if (text.ok() && text->has_value() && (*text)->size() > max)
    return Status::InvalidArgument(fmt::format("more than {} bytes", max));
  return text;
}

}  // namespace dlaunch::launcher
