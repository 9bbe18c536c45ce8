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

#include "base/status.hpp"

namespace dlaunch::launcher {

// An open directory (O_PATH) and the real path it was reached by: absolute,
// with no symbolic link, "." or "..". Owns the descriptor; fd() is -1 for a
// directory that a walk with Missing::kCheck found missing (path() is then
// where it would be made).
class WalkedDir {
 public:
  WalkedDir(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~WalkedDir();
  WalkedDir(WalkedDir&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  WalkedDir& operator=(WalkedDir&&) = delete;
  WalkedDir(const WalkedDir&) = delete;
  WalkedDir& operator=(const WalkedDir&) = delete;

  int fd() const { return fd_; }
  bool exists() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

// What a walk does with a component that does not exist.
enum class Missing {
  kFail,   // fails: "PATH: cannot resolve (No such file or directory)"
  kMake,   // makes it (mode 0777 less the umask) once MayMakeIn accepts its parent
  kCheck,  // makes nothing: ends the walk there once MayMakeIn accepts its parent
};

// Opens the directory `path` (relative to the working directory unless
// absolute). Fails (InvalidArgument) "PATH: refused (the symbolic link LINK is
// owned by uid 65534 in a directory others can write)" or "REAL: refused (not
// a directory)"; or (Io) "PATH: cannot resolve (CAUSE)" or "PATH: cannot
// create (CAUSE)" (MayMakeIn's cause, or mkdir's).
Result<WalkedDir> WalkToDir(const std::string& path, Missing missing = Missing::kFail);

// Whether this user may make a new entry in the directory `dir_fd` (named
// `dir`): it can write and search it (faccessat, effective ids: a read-only
// mount says EROFS), and it is not a kernel file system that holds no files
// (proc, sysfs, cgroup, ...), where root may write but mkdir and open fail.
// Fails (Io) with the cause alone as its message ("Permission denied", "/proc
// is a proc file system, where no files can be made"), for the caller to frame.
// Decides without making anything, so that a dry run and the run agree.
Status MayMakeIn(int dir_fd, const std::string& dir);

}  // namespace dlaunch::launcher
