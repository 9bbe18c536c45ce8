#include "launcher/core/private_dir.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace dlaunch::launcher {

namespace {

// All of `text`, or false with errno set.
bool WriteFully(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

Status WriteAndClose(int fd, const std::string& path, std::string_view text) {
  bool ok = WriteFully(fd, text);
  int err = errno;
  if (close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) return Status::Io(fmt::format("{}: cannot write ({})", path, std::strerror(err)));
  return Status::Ok();
}

// The trust rule on a directory already opened (`dir` names it).
Status CheckTrusted(int fd, const std::string& dir) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return Status::Io(fmt::format("{}: cannot read ({})", dir, std::strerror(errno)));
  uid_t me = geteuid();
  // Its owner may rename anything in it, sticky or not; root could anyway.
  if (st.st_uid != me && st.st_uid != 0)
    return Status::InvalidArgument(fmt::format("{}: refused (owned by uid {}, not {}{})", dir, st.st_uid, me,
                                               me == 0 ? "" : " or root"));
  // Without the sticky bit anyone may rename what we make in it and put their
  // own in its place.
  if ((st.st_mode & S_IWOTH) != 0 && (st.st_mode & S_ISVTX) == 0)
    return Status::InvalidArgument(fmt::format(
        "{}: refused (mode {:04o} lets every user replace what is made in it; chmod +t, as /tmp has)", dir,
        st.st_mode & 07777));
  return Status::Ok();
}

}  // namespace

Result<std::string> MakePrivateDir(const std::string& tmpdir) {
  std::string tmpl;
  if (tmpdir.starts_with('/')) {
    tmpl = fmt::format("{}/dlaunch-XXXXXX", tmpdir);
    if (mkdtemp(tmpl.data()) != nullptr) return tmpl;
  }
  tmpl = "/tmp/dlaunch-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr)
    return Status::Io(fmt::format("/tmp: cannot create a run directory ({})", std::strerror(errno)));
  return tmpl;
}

Status EnsureOwnDir(const std::string& path) {
  // lstat, not stat: a symbolic link planted by another user must not lead us
  // into a directory of theirs. It comes first: a mkdir that finds the
  // directory there still locks the parent for writing (a shared /tmp that
  // every starting dlaunch contends for), where lstat only reads.
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return Status::Io(fmt::format("{}: cannot read ({})", path, std::strerror(errno)));
    if (mkdir(path.c_str(), 0700) == 0) return Status::Ok();
    if (errno != EEXIST) return Status::Io(fmt::format("{}: cannot create ({})", path, std::strerror(errno)));
    // Made by someone else between the two calls: checked like any other.
    if (lstat(path.c_str(), &st) != 0)
      return Status::Io(fmt::format("{}: cannot read ({})", path, std::strerror(errno)));
  }
  if (S_ISLNK(st.st_mode)) return Status::InvalidArgument(fmt::format("{}: refused (a symbolic link)", path));
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(fmt::format("{}: refused (not a directory)", path));
  if (st.st_uid != geteuid())
    return Status::InvalidArgument(fmt::format("{}: refused (owned by uid {}, not {})", path, st.st_uid, geteuid()));
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return Status::InvalidArgument(
        fmt::format("{}: refused (mode {:04o} lets other users write; 0700 expected)", path, st.st_mode & 07777));
  return Status::Ok();
}

Result<std::string> TrustedDir(const std::string& dir, Missing missing) {
  // The directories above are not judged by owner: in a user namespace
  // (rootless containers) / and its neighbours often show the overflow uid,
  // and a path the user chose through another user's directory is theirs to
  // choose. The links on the way are (WalkToDir).
  Result<WalkedDir> walked = WalkToDir(dir, missing);
  if (!walked.ok()) return walked.status();
  if (Status s = CheckTrusted(walked->fd(), walked->path()); !s.ok()) return s;
  return walked->path();
}

Result<int> OpenToWrite(const std::string& path, bool fresh, mode_t mode) {
  // O_NONBLOCK: a FIFO there must not hold us until a reader comes; it is
  // refused below, and a regular file ignores the flag.
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (fresh ? O_EXCL : O_TRUNC);
  int fd = open(path.c_str(), flags, mode);
  if (fd < 0) {
    int err = errno;
    Status s = Status::Io(
        fmt::format("{}: cannot open ({})", path, err == ELOOP ? "a symbolic link, not followed" : std::strerror(err)));
    errno = err;
    return s;
  }
  // Without O_EXCL a FIFO or a device there is opened too (O_TRUNC does not
  // apply to them); only a regular file is ours to overwrite.
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    errno = EINVAL;
    return Status::Io(fmt::format("{}: cannot open (not a regular file)", path));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

Status WriteFile(const std::string& path, std::string_view text) {
  Result<int> fd = OpenToWrite(path, false, 0600);
  if (!fd.ok()) return fd.status();
  return WriteAndClose(*fd, path, text);
}

Result<std::string> WriteNumberedFile(const std::string& dir, std::string_view stem, std::string_view ext,
                                      std::string_view text) {
  constexpr int kMostFiles = 100000;  // a bound, so a directory full of them is an error, not a long loop
  for (int n = 1; n <= kMostFiles; ++n) {
    std::string path = fmt::format("{}/{}-{}{}", dir, stem, n, ext);
    Result<int> fd = OpenToWrite(path, true);
    if (!fd.ok() && errno == EEXIST) continue;
    if (!fd.ok()) return fd.status();
    if (Status s = WriteAndClose(*fd, path, text); !s.ok()) return s;
    return path;
  }
  return Status::Io(fmt::format("{}: cannot write {}-N{} (the first {} are taken)", dir, stem, ext, kMostFiles));
}

Result<std::string> WriteTempFile(const std::string& dir, std::string_view prefix, std::string_view suffix,
                                  std::string_view text) {
  std::string path = fmt::format("{}/{}XXXXXX{}", dir, prefix, suffix);
  int fd = mkstemps(path.data(), static_cast<int>(suffix.size()));
  if (fd < 0) return Status::Io(fmt::format("{}: cannot create ({})", path, std::strerror(errno)));
  if (Status s = WriteAndClose(fd, path, text); !s.ok()) {
    unlink(path.c_str());
    return s;
  }
  return path;
}

}  // namespace dlaunch::launcher
