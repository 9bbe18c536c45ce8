#include "launcher/core/dir_walk.hpp"

#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <vector>

#include <fmt/format.h>

namespace dlaunch::launcher {

WalkedDir::~WalkedDir() {
  if (fd_ >= 0) close(fd_);
}

namespace {

// As the kernel's MAXSYMLINKS: a loop of links ends with ELOOP.
constexpr int kMostLinks = 40;

// The components of `path`, in order, put at the front or the end of `out`;
// empty ones and "." are left out.
void PushComponents(const std::string& path, std::deque<std::string>& out, bool front) {
  std::vector<std::string> parts;
  size_t at = 0;
  while (at <= path.size()) {
    size_t end = path.find('/', at);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(at, end - at);
    if (!part.empty() && part != ".") parts.push_back(std::move(part));
    at = end + 1;
  }
  if (front) {
    out.insert(out.begin(), parts.begin(), parts.end());
  } else {
    out.insert(out.end(), parts.begin(), parts.end());
  }
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

// An owned descriptor that the walk moves from directory to directory.
struct Fd {
  int fd = -1;
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(-1); }
  void Reset(int to) {
    if (fd >= 0) close(fd);
    fd = to;
  }
  int Release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

constexpr int kPathFlags = O_PATH | O_NOFOLLOW | O_CLOEXEC;

// `name` in `dir`, never through a link. As a directory first: O_PATH without
// O_DIRECTORY does not trigger an automount (autofs), and the walk would sit on
// the empty mount point of an expired NFS mount. A link or a file there
// answers ENOTDIR, and is opened as itself, to be judged.
int OpenComponent(int dir, const char* name) {
  int fd = openat(dir, name, kPathFlags | O_DIRECTORY);
  if (fd < 0 && errno == ENOTDIR) fd = openat(dir, name, kPathFlags);
  return fd;
}

// One walk: the directory reached so far, held open, the real path's
// components, and the components still to walk.
class Walk {
 public:
  Walk(const std::string& path, Missing missing) : path_(path), missing_(missing) {}

  Result<WalkedDir> Run() {
    if (!path_.starts_with('/')) {
      // getcwd gives the physical path: no link to judge in it.
      char cwd[PATH_MAX];
      if (getcwd(cwd, sizeof cwd) == nullptr) return Cannot("resolve", errno);
      PushComponents(cwd, todo_, false);
    }
    PushComponents(path_, todo_, false);
    if (Status s = AtRoot(); !s.ok()) return s;
    while (!todo_.empty() && !unmade_) {
      std::string name = std::move(todo_.front());
      todo_.pop_front();
      if (Status s = name == ".." ? Up() : Enter(std::move(name)); !s.ok()) return s;
    }
    if (unmade_) {
      for (std::string& rest : todo_) real_.push_back(std::move(rest));
      return WalkedDir(-1, Join(real_));
    }
    return WalkedDir(dir_.Release(), Join(real_));
  }

 private:
  Status Cannot(const char* what, int err) const {
    return Status::Io(fmt::format("{}: cannot {} ({})", path_, what, std::strerror(err)));
  }

  Status AtRoot() {
    real_.clear();
    dir_.Reset(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (dir_.fd < 0 || fstat(dir_.fd, &dir_st_) != 0) return Cannot("resolve", errno);
    return Status::Ok();
  }

  Status Up() {
    if (real_.empty()) return Status::Ok();  // "/.." is "/"
    Fd up;
    up.Reset(openat(dir_.fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (up.fd < 0 || fstat(up.fd, &dir_st_) != 0) return Cannot("resolve", errno);
    dir_.Reset(up.Release());
    real_.pop_back();
    return Status::Ok();
  }

  // The component `name` of the directory reached: entered when it is a
  // directory, followed when it is a link, made or checked when missing.
  Status Enter(std::string name) {
    Fd next;
    next.Reset(OpenComponent(dir_.fd, name.c_str()));
    if (next.fd < 0 && errno == ENOENT && missing_ != Missing::kFail) {
      if (Status may = MayMakeIn(dir_.fd, Join(real_)); !may.ok())
        return Status::Io(fmt::format("{}: cannot create ({})", path_, may.message()));
      if (missing_ == Missing::kCheck) {
        real_.push_back(std::move(name));
        unmade_ = true;
        return Status::Ok();
      }
      // EEXIST: made by someone else meanwhile, and judged below as anything found.
      if (mkdirat(dir_.fd, name.c_str(), 0777) != 0 && errno != EEXIST) return Cannot("create", errno);
      next.Reset(OpenComponent(dir_.fd, name.c_str()));
    }
    struct stat st {};
    if (next.fd < 0 || fstat(next.fd, &st) != 0) return Cannot("resolve", errno);
    if (S_ISLNK(st.st_mode)) return Follow(next.fd, st, name);
    real_.push_back(std::move(name));
    if (!S_ISDIR(st.st_mode)) {
      if (todo_.empty()) return Status::InvalidArgument(fmt::format("{}: refused (not a directory)", Join(real_)));
      return Cannot("resolve", ENOTDIR);
    }
    dir_.Reset(next.Release());
    dir_st_ = st;
    return Status::Ok();
  }

  // The link `link_fd` (`st`, named `name` in the directory reached): its
  // target goes before the components still to walk.
  Status Follow(int link_fd, const struct stat& st, const std::string& name) {
    // fs.protected_symlinks' rule: in a directory where others may put
    // entries, only a link of ours or root's is followed.
    if (st.st_uid != geteuid() && st.st_uid != 0 && (dir_st_.st_mode & (S_ISVTX | S_IWOTH)) != 0) {
      std::vector<std::string> link = real_;
      link.push_back(name);
      return Status::InvalidArgument(
          fmt::format("{}: refused (the symbolic link {} is owned by uid {} in a directory others can write)", path_,
                      Join(link), st.st_uid));
    }
    if (++links_ > kMostLinks) return Cannot("resolve", ELOOP);
    // Read from the descriptor just judged, not by its name again.
    char target[PATH_MAX];
    ssize_t n = readlinkat(link_fd, "", target, sizeof target);
    if (n < 0 || n == static_cast<ssize_t>(sizeof target)) return Cannot("resolve", n < 0 ? errno : ENAMETOOLONG);
    std::string to(target, static_cast<size_t>(n));
    PushComponents(to, todo_, true);
    return to.starts_with('/') ? AtRoot() : Status::Ok();
  }

  const std::string& path_;
  const Missing missing_;
  std::deque<std::string> todo_;
  Fd dir_;
  struct stat dir_st_ {};
  std::vector<std::string> real_;  // the components of the real path of dir_
  int links_ = 0;
  bool unmade_ = false;  // Missing::kCheck met a component that is not there
};

}  // namespace

Status MayMakeIn(int dir_fd, const std::string& dir) {
  // Kernel file systems whose directories take no user files: root passes
  // every permission check there, and only mkdir or open itself says no.
  struct Kind {
    unsigned long magic;
    const char* name;
  };
  static constexpr Kind kKernelOnly[] = {
      {PROC_SUPER_MAGIC, "proc"},     {SYSFS_MAGIC, "sysfs"},
      {CGROUP_SUPER_MAGIC, "cgroup"}, {CGROUP2_SUPER_MAGIC, "cgroup2"},
      {DEVPTS_SUPER_MAGIC, "devpts"}, {DEBUGFS_MAGIC, "debugfs"},
      {TRACEFS_MAGIC, "tracefs"},     {SECURITYFS_MAGIC, "securityfs"},
      {PSTOREFS_MAGIC, "pstore"},     {EFIVARFS_MAGIC, "efivarfs"},
      {BPF_FS_MAGIC, "bpf"},
  };
  struct statfs fs {};
  if (fstatfs(dir_fd, &fs) == 0) {
    for (const Kind& k : kKernelOnly) {
      if (static_cast<unsigned long>(fs.f_type) == k.magic)
        return Status::Io(fmt::format("{} is a {} file system, where no files can be made", dir, k.name));
    }
  }
  if (faccessat(dir_fd, ".", W_OK | X_OK, AT_EACCESS) != 0) return Status::Io(std::strerror(errno));
  return Status::Ok();
}

Result<WalkedDir> WalkToDir(const std::string& path, Missing missing) { return Walk(path, missing).Run(); }

}  // namespace dlaunch::launcher
