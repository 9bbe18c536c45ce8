#include "launcher/core/dir_walk.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "tests/temp_dir.hpp"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kLinkOwner = 65534;  // "another user's"; only root can chown to it

std::string Real(const std::string& path) { return fs::canonical(path).string(); }

// The path a walk reached, or its message.
std::string Walk(const std::string& path, Missing missing = Missing::kFail) {
  Result<WalkedDir> d = WalkToDir(path, missing);
  return d.ok() ? d->path() : "error: " + d.status().message();
}

}  // namespace

TEST_CASE("WalkToDir resolves a path as the kernel does, to its real path", "[dir_walk]") {
  testing::TempDir t("walk");
  const std::string base = Real(t.path);
  fs::create_directories(t / "a/b/c");
  REQUIRE(symlink("b/c", (t / "a/rel").c_str()) == 0);
  REQUIRE(symlink((t / "a/b").c_str(), (t / "abs").c_str()) == 0);
  REQUIRE(symlink("../rel", (t / "a/b/up").c_str()) == 0);  // from a/b: a/rel, then a/b/c
  REQUIRE(symlink("loop", (t / "loop").c_str()) == 0);
  std::ofstream(t / "file") << "x";

  CHECK(Walk(t / "a/b/c") == base + "/a/b/c");
  CHECK(Walk(t / "a/./b//c/") == base + "/a/b/c");
  CHECK(Walk(t / "a/b/c/../..") == base + "/a");
  CHECK(Walk(t / "a/rel") == base + "/a/b/c");
  CHECK(Walk(t / "abs/c") == base + "/a/b/c");
  CHECK(Walk(t / "a/b/up") == base + "/a/b/c");
  CHECK(Walk(t / "abs/../rel") == base + "/a/b/c");  // ".." of where the link led, as the kernel has it
  CHECK(Walk("/") == "/");
  CHECK(Walk("/..") == "/");

  Result<WalkedDir> d = WalkToDir(t / "a/rel");
  REQUIRE(d.ok());
  struct stat by_fd {
  }, by_name{};
  REQUIRE(fstat(d->fd(), &by_fd) == 0);
  REQUIRE(stat((t / "a/b/c").c_str(), &by_name) == 0);
  CHECK(by_fd.st_ino == by_name.st_ino);  // the descriptor is the directory named

  CHECK(Walk(t / "missing/x") == "error: " + t / "missing/x" + ": cannot resolve (No such file or directory)");
  CHECK(Walk(t / "loop") == "error: " + t / "loop" + ": cannot resolve (Too many levels of symbolic links)");
  CHECK(Walk(t / "file/x") == "error: " + t / "file/x" + ": cannot resolve (Not a directory)");
  CHECK(Walk(t / "file") == "error: " + base + "/file: refused (not a directory)");

  // Relative to the working directory.
  std::error_code ec;
  fs::path cwd = fs::current_path();
  fs::current_path(t / "a");
  std::string relative = Walk("b/../rel");
  fs::current_path(cwd, ec);
  CHECK(relative == base + "/a/b/c");
}

TEST_CASE("WalkToDir makes what is missing, or only says whether it could", "[dir_walk]") {
  testing::TempDir t("walk");
  const std::string base = Real(t.path);
  CHECK(Walk(t / "new/deeper", Missing::kCheck) == base + "/new/deeper");
  CHECK_FALSE(fs::exists(t / "new"));
  Result<WalkedDir> made = WalkToDir(t / "new/deeper", Missing::kMake);
  REQUIRE(made.ok());
  CHECK(made->exists());
  CHECK(made->path() == base + "/new/deeper");
  CHECK(fs::is_directory(t / "new/deeper"));
  Result<WalkedDir> there = WalkToDir(t / "new/deeper", Missing::kCheck);  // there: opened as any
  REQUIRE(there.ok());
  CHECK(there->exists());

  // Where no directory can be made, both say so alike, and nothing is made.
  for (Missing m : {Missing::kCheck, Missing::kMake}) {
    CHECK(Walk("/proc/dlaunch-test/x", m) ==
          "error: /proc/dlaunch-test/x: cannot create (/proc is a proc file system, where no files can be made)");
  }
  if (geteuid() != 0) {
    fs::create_directories(t / "closed");
    REQUIRE(chmod((t / "closed").c_str(), 0500) == 0);
    CHECK(Walk(t / "closed/x", Missing::kCheck) == "error: " + t / "closed/x" + ": cannot create (Permission denied)");
  }
}

TEST_CASE("WalkToDir refuses a link another user owns in a directory others can write", "[dir_walk]") {
  if (geteuid() != 0) return;  // only root can give a link to another user
  testing::TempDir t("walk");
  const std::string base = Real(t.path);
  fs::create_directories(t / "target");
  for (const char* dir : {"sticky", "open", "theirs"}) fs::create_directories(t / dir);
  REQUIRE(chmod((t / "sticky").c_str(), 01777) == 0);  // as /tmp
  REQUIRE(chmod((t / "open").c_str(), 0777) == 0);
  REQUIRE(chown((t / "theirs").c_str(), kLinkOwner, kLinkOwner) == 0);  // their own 0755 directory
  for (const char* dir : {"sticky", "open", "theirs"}) {
    std::string link = t / dir + "/link";
    REQUIRE(symlink((t / "target").c_str(), link.c_str()) == 0);
    REQUIRE(lchown(link.c_str(), kLinkOwner, kLinkOwner) == 0);
  }
  CHECK(Walk(t / "sticky/link") == "error: " + t / "sticky/link" + ": refused (the symbolic link " + base +
                                       "/sticky/link is owned by uid 65534 in a directory others can write)");
  CHECK(Walk(t / "open/link/x", Missing::kCheck) ==
        "error: " + t / "open/link/x" + ": refused (the symbolic link " + base +
            "/open/link is owned by uid 65534 in a directory others can write)");
  // In a directory only they can write, a link of theirs is what they could
  // have made the directory itself: followed, as the kernel does.
  CHECK(Walk(t / "theirs/link") == base + "/target");
  // Ours and root's are followed anywhere.
  REQUIRE(lchown((t / "sticky/link").c_str(), 0, 0) == 0);
  CHECK(Walk(t / "sticky/link") == base + "/target");
}

TEST_CASE("MayMakeIn: writable and searchable, and not a kernel file system", "[dir_walk]") {
  testing::TempDir t("walk");
  int fd = open(t.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  CHECK(MayMakeIn(fd, t.path).ok());
  close(fd);
  fd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  CHECK(MayMakeIn(fd, "/proc").message() == "/proc is a proc file system, where no files can be made");
  close(fd);
  fd = open("/sys", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    CHECK(MayMakeIn(fd, "/sys").message() == "/sys is a sysfs file system, where no files can be made");
    close(fd);
  }
}

}  // namespace dlaunch::launcher
