#include "launcher/modes/loopback_token.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "launcher/live/live.hpp"
#include "rendezvous/auth.hpp"

namespace dlaunch::launcher {

namespace {

constexpr size_t kTokenHexDigits = 2 * rendezvous::kNonceSize;

bool IsToken(std::string_view text) {
  if (text.size() != kTokenHexDigits) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

Status Refused(const std::string& path, const std::string& why) {
  return Status::InvalidArgument(fmt::format("{}: refused ({})", path, why));
}

// NotFound when `path` does not exist; otherwise its token or why not.
Result<std::string> ReadToken(const std::string& path, uid_t uid) {
  // O_NOFOLLOW: a symlink planted in our place must not lead to another file.
  // O_NONBLOCK: a FIFO there is refused below rather than waited on.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound(fmt::format("{}: does not exist", path));
    if (err == ELOOP) return Refused(path, "a symlink");
    return Status::Io(fmt::format("{}: cannot open ({})", path, std::strerror(err)));
  }
  struct stat st {};
  Status problem;
  char buf[2 * kTokenHexDigits];
  ssize_t n = -1;
  if (fstat(fd, &st) != 0) {
    problem = Status::Io(fmt::format("{}: cannot read ({})", path, std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    problem = Refused(path, "not a regular file");
  } else if (st.st_uid != uid) {
    problem = Refused(path, fmt::format("owned by uid {}, not {}", st.st_uid, uid));
  } else if ((st.st_mode & 077) != 0) {
    problem = Refused(path, fmt::format("mode {:04o} lets other users read it; 0600 expected", st.st_mode & 07777));
  } else {
    do n = read(fd, buf, sizeof buf);
    while (n < 0 && errno == EINTR);
    if (n < 0) problem = Status::Io(fmt::format("{}: cannot read ({})", path, std::strerror(errno)));
  }
  close(fd);
  if (!problem.ok()) return problem;
  std::string_view text(buf, static_cast<size_t>(n));
  if (text.ends_with('\n')) text.remove_suffix(1);
  if (!IsToken(text))
    return Refused(path, fmt::format("not a token dlaunch wrote: expected {} hex digits", kTokenHexDigits));
  return std::string(text);
}

// Publishes a fresh token at `path` unless one is there already; Ok either way.
Status CreateToken(const std::string& dir, const std::string& path) {
  Result<std::string> nonce = rendezvous::RandomNonce();
  if (!nonce.ok()) return nonce.status();
  std::string text;
  for (unsigned char c : *nonce) text += fmt::format("{:02x}", c);
  text += '\n';
  std::string tmp = dir + "/.rdzv-token.XXXXXX";
  int fd = mkostemp(tmp.data(), O_CLOEXEC);  // O_EXCL, mode 0600
  if (fd < 0) return Status::Io(fmt::format("{}: cannot create a file ({})", dir, std::strerror(errno)));
  ssize_t n;
  do n = write(fd, text.data(), text.size());
  while (n < 0 && errno == EINTR);
  int write_err = n == static_cast<ssize_t>(text.size()) ? 0 : n < 0 ? errno : ENOSPC;
  if (close(fd) != 0 && write_err == 0) write_err = errno;
  int link_err = write_err == 0 && link(tmp.c_str(), path.c_str()) != 0 ? errno : 0;
  unlink(tmp.c_str());
  if (write_err != 0) return Status::Io(fmt::format("{}: cannot write ({})", tmp, std::strerror(write_err)));
  // EEXIST: another agent published first; its token is the one to use.
  if (link_err != 0 && link_err != EEXIST)
    return Status::Io(fmt::format("{}: cannot create ({})", path, std::strerror(link_err)));
  return Status::Ok();
}

}  // namespace

std::string LoopbackTokenDir(uid_t uid) {
  // The live view's fallback directory, which no environment variable moves
  // (the header says why).
  return LiveDir(envmap::EnvMap{}, uid);
}

Result<std::string> LoopbackToken(const std::string& dir, uid_t uid) {
  if (Status s = OpenLiveDir(dir, uid); !s.ok()) return s;
  std::string path = dir + "/" + kLoopbackTokenFile;
  Result<std::string> token = ReadToken(path, uid);
  if (token.ok() || token.status().code() != Code::kNotFound) return token;
  if (Status s = CreateToken(dir, path); !s.ok()) return s;
  return ReadToken(path, uid);
}

Result<std::string> OwnLoopbackToken(const std::string& endpoint) {
  Result<std::string> token = LoopbackToken(LoopbackTokenDir(getuid()), getuid());
  if (token.ok()) return token;
  return Status::InvalidArgument(
      fmt::format("{}: no token given, and this user's loopback token cannot be used ({}); set {} or --rdzv-token-file",
                  endpoint, token.status().message(), rendezvous::kTokenEnvVar));
}

}  // namespace dlaunch::launcher
