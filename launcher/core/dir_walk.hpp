// A directory path walked one component at a time: each component is opened
// relative to the directory before it (openat, O_NOFOLLOW) and judged by what
// fstat says of the descriptor, never by a name looked up again later. So a
// directory another user renames or replaces between a check and its use is
// not mistaken for the one checked.
//
// Symbolic links are followed as the kernel follows them, with the rule of its
// fs.protected_symlinks applied whatever that setting says (it is 0 on many
// machines): a link that another user (neither this user nor root) owns, in a
// directory that is sticky or that others can write (/tmp), is refused. Such a
// link may have been planted to lead this user's files elsewhere.
//
// Every function may be called from any thread. "This user" is the effective uid.
#pragma once

#include <string>

#include "envmap/status.hpp"

namespace dlaunch::launcher {

// An open directory (O_PATH) and the real path it was reached by: absolute,
// with no symbolic link, "." or "..". Owns the descriptor.
class WalkedDir {
 public:
  WalkedDir(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~WalkedDir();
  WalkedDir(WalkedDir&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  WalkedDir& operator=(WalkedDir&&) = delete;
  WalkedDir(const WalkedDir&) = delete;
  WalkedDir& operator=(const WalkedDir&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

// What a walk does with a component that does not exist.
enum class Missing {
  kFail,  // fails: "PATH: cannot resolve (No such file or directory)"
  kMake,  // makes it (mode 0777 less the umask)
};

// Opens the directory `path` (relative to the working directory unless
// absolute). Fails (InvalidArgument) "PATH: refused (the symbolic link LINK is
// owned by uid 65534 in a directory others can write)" or "REAL: refused (not
// a directory)"; or (Io) "PATH: cannot resolve (CAUSE)" or "PATH: cannot
// create (CAUSE)".
Result<WalkedDir> WalkToDir(const std::string& path, Missing missing = Missing::kFail);

}  // namespace dlaunch::launcher
