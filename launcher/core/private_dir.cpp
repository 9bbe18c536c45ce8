#include "launcher/core/private_dir.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include <linux/magic.h>

#include <fmt/format.h>

#include "launcher/core/system.hpp"

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
  // Its owner may rename anything in it, sticky or not; root could anyway. In
  // a user namespace (unshare -r, bwrap, rootless Apptainer) the host's root,
  // who owns /tmp, shows as the overflow uid, which no process inside can act
  // as: trusted as root is.
  // Read only when it could matter: the usual owner is us or root.
  if (st.st_uid != me && st.st_uid != 0) {
    static const std::optional<uid_t> unmapped = UnmappedOwner();
    if (st.st_uid != unmapped)
      return Status::InvalidArgument(
          fmt::format("{}: refused (owned by uid {}, not {}{})", dir, st.st_uid, me, me == 0 ? "" : " or root"));
  }
  // Without the sticky bit anyone may rename what we make in it and put their
  // own in its place.
  if ((st.st_mode & S_IWOTH) != 0 && (st.st_mode & S_ISVTX) == 0)
    return Status::InvalidArgument(
        fmt::format("{}: refused (mode {:04o} lets every user replace what is made in it; chmod +t, as /tmp has)", dir,
                    st.st_mode & 07777));
  return Status::Ok();
}

Result<WalkedDir> OpenTrusted(const std::string& dir) {
  Result<WalkedDir> walked = WalkToDir(dir);
  if (!walked.ok()) return walked.status();
  if (Status s = CheckTrusted(walked->fd(), walked->path()); !s.ok()) return s;
  return walked;
}

// dlaunch-XXXXXX made in `parent` (held open: mkdirat, not a name looked up
// again), mode 0700 whatever the umask, and seen to be ours.
Result<std::string> MakeFreshIn(const WalkedDir& parent) {
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  constexpr int kTries = 100;  // as mkdtemp: names taken this often mean something else is wrong
  std::string tmpl = fmt::format("{}/dlaunch-XXXXXX", parent.path());
  for (int i = 0; i < kTries; ++i) {
    unsigned char random[6];
    if (getrandom(random, sizeof random, 0) != static_cast<ssize_t>(sizeof random))
      return Status::Io(fmt::format("{}: cannot create ({})", tmpl, std::strerror(errno)));
    std::string name = "dlaunch-";
    for (unsigned char r : random) name += kChars[r % (sizeof kChars - 1)];
    if (mkdirat(parent.fd(), name.c_str(), 0700) != 0) {
      if (errno == EEXIST) continue;
      return Status::Io(fmt::format("{}: cannot create ({})", tmpl, std::strerror(errno)));
    }
    std::string path = fmt::format("{}/{}", parent.path(), name);
    // The parent is trusted: the name is still ours here.
    int fd = fchmodat(parent.fd(), name.c_str(), 0700, 0) == 0
                 ? openat(parent.fd(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                 : -1;
    struct stat st {};
    bool ours =
        fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 07777) == 0700;
    int err = errno;
    if (fd >= 0) close(fd);
    if (!ours) {
      unlinkat(parent.fd(), name.c_str(), AT_REMOVEDIR);
      return Status::Io(fmt::format("{}: cannot create ({})", path, fd < 0 ? std::strerror(err) : "not 0700 and ours"));
    }
    return path;
  }
  return Status::Io(fmt::format("{}: cannot create ({})", tmpl, std::strerror(EEXIST)));
}

// TMPDIR, held open, when it is an absolute path that passes TrustedDir's rule.
Result<WalkedDir> OpenTmpdir(const std::string& tmpdir) {
  // After `sudo -E` TMPDIR may be another user's directory: nothing of
  // root's goes there, and the job goes on without it.
  if (!tmpdir.starts_with('/'))
    return Status::InvalidArgument(fmt::format("{}: not used (not an absolute path)", tmpdir));
  return OpenTrusted(tmpdir);
}

// TMPDIR when set and usable (OpenTmpdir), held open, else /tmp; `note` says
// why a TMPDIR that is set was not used.
Result<WalkedDir> OpenTempParent(const std::string& tmpdir, std::string& note) {
  if (!tmpdir.empty()) {
    Result<WalkedDir> parent = OpenTmpdir(tmpdir);
    if (parent.ok()) return parent;
    note = fmt::format("TMPDIR {}", parent.status().message());
  }
  Result<WalkedDir> tmp = OpenTrusted("/tmp");
  if (!tmp.ok()) return Status::Io(note.empty() ? tmp.status().message() : note + " (" + tmp.status().message() + ")");
  if (!note.empty()) note += "; using /tmp";
  return tmp;
}

// Why the file system of `dir` (open) is too full for dlaunch's own files
// (TooFull); empty when it has room or cannot say.
std::string TooFullNow(const WalkedDir& dir) {
  struct statfs fs {};
  if (fstatfs(dir.fd(), &fs) != 0) return {};
  uint64_t block = fs.f_frsize != 0 ? static_cast<uint64_t>(fs.f_frsize) : static_cast<uint64_t>(fs.f_bsize);
  return TooFull(dir.path(),
                 FreeSpace{static_cast<uint64_t>(fs.f_blocks) * block, static_cast<uint64_t>(fs.f_bavail) * block,
                           static_cast<uint64_t>(fs.f_files), static_cast<uint64_t>(fs.f_ffree)});
}

}  // namespace

const std::string& DefaultTempParent() {
  static const std::string parent = [] {
    // Nothing in a tmpfs reaches a disk: making and removing a file there
    // costs no inode bitmap or journal work, which on a journal-less ext4
    // /tmp was a tenth of an agent's time (bench/profile/agent.md). Only
    // one that no other user can replace entries in.
    struct statfs fs {};
    if (statfs("/dev/shm", &fs) != 0 || fs.f_type != TMPFS_MAGIC) return std::string("/tmp");
    Result<WalkedDir> shm = OpenTrusted("/dev/shm");
    // TrustedDir's rule trusts a directory's group, as a user who names such
    // a TMPDIR chooses to; nobody chose /dev/shm: its group may not write it
    // either, unless it is sticky.
    struct stat st {};
    bool usable = shm.ok() && fstat(shm->fd(), &st) == 0 &&
                  ((st.st_mode & (S_IWGRP | S_IWOTH)) == 0 || (st.st_mode & S_ISVTX) != 0);
    return usable ? std::string("/dev/shm") : std::string("/tmp");
  }();
  return parent;
}

Result<PrivateDir> MakePrivateDir(const std::string& tmpdir, const std::string& fallback) {
  // TMPDIR, then `fallback`, then /tmp, as Python's tempfile goes on to the
  // next candidate: one that is refused or where nothing can be made (full,
  // read-only) gives way to the next, and `note` says why.
  std::string note;
  if (!tmpdir.empty()) {
    Result<WalkedDir> parent = OpenTmpdir(tmpdir);
    Result<std::string> made = parent.ok() ? MakeFreshIn(*parent) : Result<std::string>(parent.status());
    if (made.ok()) return PrivateDir{*made, ""};
    note = fmt::format("TMPDIR {}", made.status().message());
  }
  // A fallback that fails the trust rule is passed over without a word: the
  // user did not name it (DefaultTempParent judged it already).
  if (fallback != "/tmp") {
    if (Result<WalkedDir> parent = OpenTrusted(fallback); parent.ok()) {
      // In memory, dlaunch's files share what room there is with the job's
      // own shared memory, and a worker's error file that cannot be written
      // masks why it failed (torch's @record raises "No space left on device"
      // instead): a fallback nearly full is passed over too.
      std::string full = TooFullNow(*parent);
      Result<std::string> made = full.empty() ? MakeFreshIn(*parent) : Result<std::string>(Status::Io(full));
      if (made.ok()) return PrivateDir{*made, note.empty() ? note : note + "; using " + parent->path()};
      note += (note.empty() ? "" : "; ") + made.status().message();
    }
  }
  Result<WalkedDir> tmp = OpenTrusted("/tmp");
  if (!tmp.ok()) return Status::Io(note.empty() ? tmp.status().message() : note + " (" + tmp.status().message() + ")");
  Result<std::string> made = MakeFreshIn(*tmp);
  if (!made.ok()) return note.empty() ? made.status() : Status::Io(note + "; " + made.status().message());
  return PrivateDir{*made, note.empty() ? note : note + "; using /tmp"};
}

std::string TooFull(const std::string& dir, const FreeSpace& space) {
  if (space.bytes != 0 && space.bytes_free < kMinFreeBytes)
    return fmt::format("{}: not used (only {} KiB free; {} MiB wanted)", dir, space.bytes_free >> 10,
                       kMinFreeBytes >> 20);
  if (space.inodes != 0 && space.inodes_free < kMinFreeInodes)
    return fmt::format("{}: not used (only {} inodes free; {} wanted)", dir, space.inodes_free, kMinFreeInodes);
  return {};
}

Result<PrivateDir> TrustedTempDir(const std::string& tmpdir) {
  std::string note;
  Result<WalkedDir> parent = OpenTempParent(tmpdir, note);
  if (!parent.ok()) return parent.status();
  return PrivateDir{parent->path(), note};
}

Status EnsureOwnDir(const std::string& path, bool make) {
  // lstat, not stat: a symbolic link planted by another user must not lead us
  // into a directory of theirs. It comes first: a mkdir that finds the
  // directory there still locks the parent for writing (a shared /tmp that
  // every starting dlaunch contends for), where lstat only reads.
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return Status::Io(fmt::format("{}: cannot read ({})", path, std::strerror(errno)));
    // Asked first, so that --explain (make false) and the run refuse alike.
    std::string parent = path.substr(0, path.find_last_of('/') + 1);
    int fd = open(parent.empty() ? "." : parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Status::Io(fmt::format("{}: cannot create ({})", path, std::strerror(errno)));
    Status may = MayMakeIn(fd, parent.size() > 1 ? parent.substr(0, parent.size() - 1) : parent);
    close(fd);
    if (!may.ok()) return Status::Io(fmt::format("{}: cannot create ({})", path, may.message()));
    if (!make) return Status::Ok();
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
  if (!walked->exists()) return walked->path();  // this user would make it
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
    // A file cut short (the file system full) goes: a hang's stacks-1.txt
    // that holds nothing would keep the job's directory, in memory when it is
    // /dev/shm, and have dlaunch point at it.
    if (Status s = WriteAndClose(*fd, path, text); !s.ok()) {
      unlink(path.c_str());
      return s;
    }
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
