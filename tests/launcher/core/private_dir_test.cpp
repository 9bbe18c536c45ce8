#include "launcher/core/private_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>
#include <linux/magic.h>

#include "tests/temp_dir.hpp"
#include <fmt/format.h>

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;

// The uid a file is given to show "another user's"; only root can chown to it.
constexpr uid_t kOther = 65534;

struct stat Lstat(const std::string& path) {
  struct stat st {};
  REQUIRE(lstat(path.c_str(), &st) == 0);
  return st;
}

using dlaunch::testing::ReadFile;

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST_CASE("MakePrivateDir: a fresh 0700 directory of ours under TMPDIR, else the fallback", "[private_dir]") {
  testing::TempDir t;
  const std::string base = fs::canonical(t.path).string();
  Result<PrivateDir> a = MakePrivateDir(t.path, "/tmp");
  REQUIRE(a.ok());
  CHECK(a->path.starts_with(base + "/dlaunch-"));
  CHECK(a->path.size() == (base + "/dlaunch-").size() + 6);
  CHECK(a->note.empty());
  struct stat st = Lstat(a->path);
  CHECK(S_ISDIR(st.st_mode));
  CHECK((st.st_mode & 07777) == 0700);
  CHECK(st.st_uid == geteuid());
  Result<PrivateDir> b = MakePrivateDir(t.path, "/tmp");
  REQUIRE(b.ok());
  CHECK(a->path != b->path);
  // 0700 whatever the umask.
  mode_t old = umask(0777);
  Result<PrivateDir> masked = MakePrivateDir(t.path, "/tmp");
  umask(old);
  REQUIRE(masked.ok());
  CHECK((Lstat(masked->path).st_mode & 07777) == 0700);

  // Empty: /tmp, as Python's tempfile does, and nothing to say.
  Result<PrivateDir> c = MakePrivateDir("", "/tmp");
  REQUIRE(c.ok());
  CHECK(c->path.starts_with("/tmp/dlaunch-"));
  CHECK(c->note.empty());
  fs::remove(c->path);
  // Relative or unusable: /tmp too, with one line saying why.
  const std::pair<std::string, std::string> kUnused[] = {
      {"relative", "TMPDIR relative: not used (not an absolute path); using /tmp"},
      {t / "missing", "TMPDIR " + t / "missing" + ": cannot resolve (No such file or directory); using /tmp"},
  };
  for (const auto& [tmpdir, note] : kUnused) {
    Result<PrivateDir> d = MakePrivateDir(tmpdir, "/tmp");
    REQUIRE(d.ok());
    CHECK(d->path.starts_with("/tmp/dlaunch-"));
    CHECK(d->note == note);
    fs::remove(d->path);
  }
}

TEST_CASE("DefaultTempParent: /dev/shm when it is a tmpfs no other user can replace entries in", "[private_dir]") {
  const std::string& parent = DefaultTempParent();
  struct statfs shm {};
  struct stat st {};
  // root's own symlink (/dev/shm -> /run/shm) is followed; the group, too, may write it only when sticky.
  bool usable = statfs("/dev/shm", &shm) == 0 && shm.f_type == TMPFS_MAGIC && stat("/dev/shm", &st) == 0 &&
                S_ISDIR(st.st_mode) && (st.st_uid == 0 || st.st_uid == geteuid()) &&
                ((st.st_mode & (S_IWGRP | S_IWOTH)) == 0 || (st.st_mode & S_ISVTX) != 0);
  CHECK(parent == (usable ? "/dev/shm" : "/tmp"));
  CHECK(&DefaultTempParent() == &parent);  // judged once
}

TEST_CASE("MakePrivateDir: a fallback that is refused or cannot hold it gives way to /tmp", "[private_dir]") {
  testing::TempDir t;
  const std::string base = fs::canonical(t.path).string();
  // A fallback such as /dev/shm, when it is usable: no TMPDIR, nothing to say.
  REQUIRE(mkdir((t / "ram").c_str(), 0700) == 0);
  REQUIRE(chmod((t / "ram").c_str(), 01777) == 0);
  Result<PrivateDir> a = MakePrivateDir("", t / "ram");
  REQUIRE(a.ok());
  CHECK(a->path.starts_with(base + "/ram/dlaunch-"));
  CHECK(a->note.empty());
  // A TMPDIR that is refused names the fallback it used.
  Result<PrivateDir> b = MakePrivateDir("relative", t / "ram");
  REQUIRE(b.ok());
  CHECK(b->path.starts_with(base + "/ram/dlaunch-"));
  CHECK(b->note == "TMPDIR relative: not used (not an absolute path); using " + base + "/ram");
  // A fallback every user may replace entries in: /tmp, silently (TMPDIR was not set).
  REQUIRE(mkdir((t / "open").c_str(), 0700) == 0);
  REQUIRE(chmod((t / "open").c_str(), 0777) == 0);
  Result<PrivateDir> c = MakePrivateDir("", t / "open");
  REQUIRE(c.ok());
  CHECK(c->path.starts_with("/tmp/dlaunch-"));
  CHECK(c->note.empty());
  CHECK(fs::is_empty(t / "open"));
  Result<PrivateDir> d = MakePrivateDir("relative", t / "open");
  REQUIRE(d.ok());
  CHECK(d->path.starts_with("/tmp/dlaunch-"));
  CHECK(d->note == "TMPDIR relative: not used (not an absolute path); using /tmp");
  // A fallback where nothing can be made (a file stands where it should be).
  Write(t / "file", "x");
  Result<PrivateDir> e = MakePrivateDir("", t / "file");
  REQUIRE(e.ok());
  CHECK(e->path.starts_with("/tmp/dlaunch-"));
  for (const Result<PrivateDir>* r : {&a, &b, &c, &d, &e}) fs::remove((*r)->path);
}

TEST_CASE("MakePrivateDir: each place where nothing can be made gives way to the next, saying why", "[private_dir]") {
  testing::TempDir t;
  const std::string base = fs::canonical(t.path).string();
  REQUIRE(mkdir((t / "ram").c_str(), 0700) == 0);
  REQUIRE(chmod((t / "ram").c_str(), 01777) == 0);
  // /proc passes the trust rule (root's, 0555) and holds nothing made there,
  // not even root's: a TMPDIR or a /dev/shm that is full or read-only.
  const std::string proc_fails = "/proc/dlaunch-XXXXXX: cannot create (No such file or directory)";
  // A TMPDIR that is refused, then a fallback where nothing can be made: /tmp,
  // and the job goes on; the one line names both.
  Result<PrivateDir> a = MakePrivateDir("relative", "/proc");
  REQUIRE(a.ok());
  CHECK(a->path.starts_with("/tmp/dlaunch-"));
  CHECK(a->note == "TMPDIR relative: not used (not an absolute path); " + proc_fails + "; using /tmp");
  // A TMPDIR where nothing can be made: the fallback next, as a refused one.
  Result<PrivateDir> b = MakePrivateDir("/proc", t / "ram");
  REQUIRE(b.ok());
  CHECK(b->path.starts_with(base + "/ram/dlaunch-"));
  CHECK(b->note == "TMPDIR " + proc_fails + "; using " + base + "/ram");
  // Neither: /tmp.
  Result<PrivateDir> c = MakePrivateDir("/proc", "/proc");
  REQUIRE(c.ok());
  CHECK(c->path.starts_with("/tmp/dlaunch-"));
  CHECK(c->note == "TMPDIR " + proc_fails + "; " + proc_fails + "; using /tmp");
  for (const Result<PrivateDir>* r : {&a, &b, &c}) fs::remove((*r)->path);
}

TEST_CASE("TooFull: a fallback with too little room left for dlaunch's files", "[private_dir]") {
  constexpr uint64_t kMiB = 1 << 20;
  struct Case {
    FreeSpace space;
    std::string why;
  };
  const Case kCases[] = {
      // A container's /dev/shm (64 MiB), empty and nearly full.
      {{64 * kMiB, 64 * kMiB, 1000000, 1000000}, ""},
      {{64 * kMiB, kMinFreeBytes, 1000000, 1000000}, ""},
      {{64 * kMiB, kMinFreeBytes - 1, 1000000, 1000000}, "/dev/shm: not used (only 16383 KiB free; 16 MiB wanted)"},
      {{64 * kMiB, 0, 1000000, 1000000}, "/dev/shm: not used (only 0 KiB free; 16 MiB wanted)"},
      // Too small even when empty.
      {{kMiB, kMiB, 1000000, 1000000}, "/dev/shm: not used (only 1024 KiB free; 16 MiB wanted)"},
      // Out of inodes, with room in bytes.
      {{64 * kMiB, 64 * kMiB, 2000, kMinFreeInodes}, ""},
      {{64 * kMiB, 64 * kMiB, 2000, 37}, "/dev/shm: not used (only 37 inodes free; 1024 wanted)"},
      // A tmpfs mounted with size=0 or nr_inodes=0 has no limit: statfs says 0 of 0.
      {{0, 0, 0, 0}, ""},
      {{0, 0, 2000, 3}, "/dev/shm: not used (only 3 inodes free; 1024 wanted)"},
      {{64 * kMiB, 1, 0, 0}, "/dev/shm: not used (only 0 KiB free; 16 MiB wanted)"},
  };
  for (const Case& c : kCases) {
    INFO(c.space.bytes << " " << c.space.bytes_free << " " << c.space.inodes << " " << c.space.inodes_free);
    CHECK(TooFull("/dev/shm", c.space) == c.why);
  }
}

TEST_CASE("MakePrivateDir uses TMPDIR only where no other user can replace what it makes", "[private_dir]") {
  testing::TempDir t;
  const std::string base = fs::canonical(t.path).string();
  // Sticky, as /tmp: accepted.
  REQUIRE(mkdir((t / "sticky").c_str(), 0700) == 0);
  REQUIRE(chmod((t / "sticky").c_str(), 01777) == 0);
  Result<PrivateDir> sticky = MakePrivateDir(t / "sticky", "/tmp");
  REQUIRE(sticky.ok());
  CHECK(sticky->path.starts_with(base + "/sticky/dlaunch-"));
  CHECK(sticky->note.empty());
  // Every user may write it and it is not sticky: anyone could rename ours.
  REQUIRE(mkdir((t / "open").c_str(), 0700) == 0);
  REQUIRE(chmod((t / "open").c_str(), 0777) == 0);
  Result<PrivateDir> open = MakePrivateDir(t / "open", "/tmp");
  REQUIRE(open.ok());
  CHECK(open->path.starts_with("/tmp/dlaunch-"));
  CHECK(open->note == "TMPDIR " + base +
                          "/open: refused (mode 0777 lets every user replace what is made in it; chmod +t, as /tmp "
                          "has); using /tmp");
  CHECK(fs::is_empty(t / "open"));
  fs::remove(open->path);
  // A temporary file's directory, by the same rule.
  Result<PrivateDir> for_file = TrustedTempDir(t / "open");
  REQUIRE(for_file.ok());
  CHECK(for_file->path == "/tmp");
  CHECK(for_file->note == open->note);
  for_file = TrustedTempDir(t / "sticky");
  REQUIRE(for_file.ok());
  CHECK(for_file->path == base + "/sticky");
  CHECK(for_file->note.empty());
  // Through a link of ours: made in the directory it leads to, named by its real path.
  REQUIRE(symlink((t / "sticky").c_str(), (t / "to-sticky").c_str()) == 0);
  Result<PrivateDir> via = MakePrivateDir(t / "to-sticky", "/tmp");
  REQUIRE(via.ok());
  CHECK(via->path.starts_with(base + "/sticky/dlaunch-"));

  if (geteuid() == 0) {
    // Their directory (after `sudo -E`, say): its owner could rename ours.
    REQUIRE(mkdir((t / "theirs").c_str(), 0755) == 0);
    REQUIRE(chown((t / "theirs").c_str(), kOther, kOther) == 0);
    Result<PrivateDir> theirs = MakePrivateDir(t / "theirs", "/tmp");
    REQUIRE(theirs.ok());
    CHECK(theirs->path.starts_with("/tmp/dlaunch-"));
    CHECK(theirs->note == "TMPDIR " + base + "/theirs: refused (owned by uid 65534, not 0); using /tmp");
    CHECK(fs::is_empty(t / "theirs"));
    fs::remove(theirs->path);
    // A link they planted in a sticky directory, to a directory of root's.
    REQUIRE(symlink((t / "sticky").c_str(), (t / "sticky/planted").c_str()) == 0);
    REQUIRE(lchown((t / "sticky/planted").c_str(), kOther, kOther) == 0);
    Result<PrivateDir> planted = MakePrivateDir(t / "sticky/planted", "/tmp");
    REQUIRE(planted.ok());
    CHECK(planted->path.starts_with("/tmp/dlaunch-"));
    CHECK(planted->note == "TMPDIR " + t / "sticky/planted" + ": refused (the symbolic link " + base +
                               "/sticky/planted is owned by uid 65534 in a directory others can write); using /tmp");
    fs::remove(planted->path);
  }
}

TEST_CASE("EnsureOwnDir makes 0700 directories and accepts only ours that no one else can write", "[private_dir]") {
  testing::TempDir t;
  REQUIRE(EnsureOwnDir(t / "new").ok());
  CHECK((Lstat(t / "new").st_mode & 07777) == 0700);
  CHECK(EnsureOwnDir(t / "new").ok());  // again: ours
  REQUIRE(mkdir((t / "open").c_str(), 0755) == 0);
  CHECK(EnsureOwnDir(t / "open").ok());  // others may read, not write

  REQUIRE(mkdir((t / "shared").c_str(), 0700) == 0);
  REQUIRE(chmod((t / "shared").c_str(), 0777) == 0);
  Status s = EnsureOwnDir(t / "shared");
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK(s.message() == t / "shared" + ": refused (mode 0777 lets other users write; 0700 expected)");
  REQUIRE(chmod((t / "shared").c_str(), 0770) == 0);
  CHECK(EnsureOwnDir(t / "shared").message() ==
        t / "shared" + ": refused (mode 0770 lets other users write; 0700 expected)");

  // A symbolic link, even to a directory of ours, is not followed.
  REQUIRE(symlink((t / "new").c_str(), (t / "link").c_str()) == 0);
  CHECK(EnsureOwnDir(t / "link").message() == t / "link" + ": refused (a symbolic link)");
  Write(t / "file", "x");
  CHECK(EnsureOwnDir(t / "file").message() == t / "file" + ": refused (not a directory)");
  s = EnsureOwnDir(t / "missing/below");
  CHECK(s.code() == Code::kIo);
  CHECK(s.message() == t / "missing/below" + ": cannot create (No such file or directory)");

  if (geteuid() == 0) {
    REQUIRE(mkdir((t / "theirs").c_str(), 0700) == 0);
    REQUIRE(chown((t / "theirs").c_str(), kOther, kOther) == 0);
    CHECK(EnsureOwnDir(t / "theirs").message() == t / "theirs" + ": refused (owned by uid 65534, not 0)");
    CHECK(EnsureOwnDir(t / "theirs", false).message() == t / "theirs" + ": refused (owned by uid 65534, not 0)");
  }

  // Without making: what could be made passes, and nothing is made.
  CHECK(EnsureOwnDir(t / "later", false).ok());
  CHECK_FALSE(fs::exists(t / "later"));
  CHECK(EnsureOwnDir(t / "link", false).message() == t / "link" + ": refused (a symbolic link)");
  CHECK(EnsureOwnDir(t / "missing/below", false).message() ==
        t / "missing/below" + ": cannot create (No such file or directory)");
  for (bool make : {false, true}) {
    CHECK(EnsureOwnDir("/proc/dlaunch-test", make).message() ==
          "/proc/dlaunch-test: cannot create (/proc is a proc file system, where no files can be made)");
  }
}

TEST_CASE("TrustedDir: ours or root's, and sticky when every user may write it", "[private_dir]") {
  testing::TempDir t;
  REQUIRE(mkdir((t / "d").c_str(), 0700) == 0);
  Result<std::string> d = TrustedDir(t / "d");
  REQUIRE(d.ok());
  CHECK(*d == fs::canonical(t / "d").string());
  // A link to it is resolved: what is made below goes into the directory checked.
  REQUIRE(symlink((t / "d").c_str(), (t / "to-d").c_str()) == 0);
  Result<std::string> via_link = TrustedDir(t / "to-d");
  REQUIRE(via_link.ok());
  CHECK(*via_link == *d);

  REQUIRE(chmod((t / "d").c_str(), 01777) == 0);  // as /tmp
  CHECK(TrustedDir(t / "d").ok());
  REQUIRE(chmod((t / "d").c_str(), 0777) == 0);
  CHECK(TrustedDir(t / "d").status().message() ==
        *d + ": refused (mode 0777 lets every user replace what is made in it; chmod +t, as /tmp has)");
  REQUIRE(chmod((t / "d").c_str(), 0775) == 0);  // its group is trusted
  CHECK(TrustedDir(t / "d").ok());
  CHECK(TrustedDir(t / "missing").status().code() == Code::kIo);

  if (geteuid() == 0) {
    REQUIRE(chmod((t / "d").c_str(), 01777) == 0);
    REQUIRE(chown((t / "d").c_str(), kOther, kOther) == 0);  // its owner may rename what we make, sticky or not
    CHECK(TrustedDir(t / "d").status().message() == *d + ": refused (owned by uid 65534, not 0)");
  }
}

TEST_CASE("TrustedDir follows no link another user planted where others can write", "[private_dir]") {
  if (geteuid() != 0) return;  // only root can give a link to another user
  testing::TempDir t;
  const std::string base = fs::canonical(t.path).string();
  REQUIRE(mkdir((t / "roots").c_str(), 0700) == 0);
  REQUIRE(mkdir((t / "sticky").c_str(), 0700) == 0);
  REQUIRE(chmod((t / "sticky").c_str(), 01777) == 0);
  REQUIRE(symlink((t / "roots").c_str(), (t / "sticky/x").c_str()) == 0);
  REQUIRE(lchown((t / "sticky/x").c_str(), kOther, kOther) == 0);
  const std::string refusal = t / "sticky/x" + ": refused (the symbolic link " + base +
                              "/sticky/x is owned by uid 65534 in a directory others can write)";
  for (Missing m : {Missing::kFail, Missing::kMake, Missing::kCheck}) {
    Result<std::string> d = TrustedDir(t / "sticky/x", m);
    CHECK(d.status().code() == Code::kInvalidArgument);
    CHECK(d.status().message() == refusal);
  }
  CHECK(TrustedDir(t / "sticky/x/below", Missing::kMake).status().message() ==
        t / "sticky/x/below" + ": refused (the symbolic link " + base +
            "/sticky/x is owned by uid 65534 in a directory others can write)");
  CHECK(fs::is_empty(t / "roots"));
}

TEST_CASE("TrustedDir makes what is missing, or only checks that it could", "[private_dir]") {
  testing::TempDir t;
  const std::string base = fs::canonical(t.path).string();
  Result<std::string> checked = TrustedDir(t / "a/b", Missing::kCheck);
  REQUIRE(checked.ok());
  CHECK(*checked == base + "/a/b");
  CHECK_FALSE(fs::exists(t / "a"));
  Result<std::string> made = TrustedDir(t / "a/b", Missing::kMake);
  REQUIRE(made.ok());
  CHECK(*made == base + "/a/b");
  CHECK(fs::is_directory(t / "a/b"));
  REQUIRE(chmod((t / "a/b").c_str(), 0777) == 0);  // there now: judged as any
  CHECK(TrustedDir(t / "a/b", Missing::kCheck).status().message() ==
        base + "/a/b: refused (mode 0777 lets every user replace what is made in it; chmod +t, as /tmp has)");
  for (Missing m : {Missing::kCheck, Missing::kMake}) {
    CHECK(TrustedDir("/proc/dlaunch-test", m).status().message() ==
          "/proc/dlaunch-test: cannot create (/proc is a proc file system, where no files can be made)");
  }
}

TEST_CASE("OpenToWrite never writes through a symbolic link, and fresh files are new", "[private_dir]") {
  testing::TempDir t;
  Write(t / "target", "precious");
  REQUIRE(symlink((t / "target").c_str(), (t / "link").c_str()) == 0);
  for (bool fresh : {true, false}) {
    INFO("fresh " << fresh);
    Result<int> fd = OpenToWrite(t / "link", fresh);
    REQUIRE_FALSE(fd.ok());
    CHECK(fd.status().message() ==
          t / "link" + (fresh ? ": cannot open (File exists)" : ": cannot open (a symbolic link, not followed)"));
    CHECK(ReadFile(t / "target") == "precious");
  }
  // A dangling link too: O_CREAT would otherwise make its target.
  REQUIRE(symlink((t / "made-through").c_str(), (t / "dangling").c_str()) == 0);
  CHECK_FALSE(OpenToWrite(t / "dangling", false).ok());
  CHECK_FALSE(OpenToWrite(t / "dangling", true).ok());
  CHECK_FALSE(fs::exists(t / "made-through"));

  Result<int> fd = OpenToWrite(t / "new", true, 0600);
  REQUIRE(fd.ok());
  close(*fd);
  CHECK((Lstat(t / "new").st_mode & 07777) == 0600);
  errno = 0;
  CHECK_FALSE(OpenToWrite(t / "new", true).ok());
  CHECK(errno == EEXIST);

  fd = OpenToWrite(t / "target", false);  // truncated
  REQUIRE(fd.ok());
  CHECK((fcntl(*fd, F_GETFL) & O_NONBLOCK) == 0);
  close(*fd);
  CHECK(ReadFile(t / "target").empty());

  REQUIRE(mkfifo((t / "fifo").c_str(), 0600) == 0);
  Result<int> fifo = OpenToWrite(t / "fifo", false);  // refused at once, no reader awaited
  CHECK_FALSE(fifo.ok());
  int reader = open((t / "fifo").c_str(), O_RDONLY | O_NONBLOCK);  // with a reader: still not a regular file
  REQUIRE(reader >= 0);
  CHECK(OpenToWrite(t / "fifo", false).status().message() == t / "fifo" + ": cannot open (not a regular file)");
  close(reader);
}

TEST_CASE("WriteNumberedFile takes the first free number and leaves what is there", "[private_dir]") {
  testing::TempDir t;
  Write(t / "stacks-1.txt", "old");
  Write(t / "precious", "precious");
  REQUIRE(symlink((t / "precious").c_str(), (t / "stacks-2.txt").c_str()) == 0);
  Result<std::string> p = WriteNumberedFile(t.path, "stacks", ".txt", "new");
  REQUIRE(p.ok());
  CHECK(*p == t / "stacks-3.txt");
  CHECK(ReadFile(*p) == "new");
  CHECK(ReadFile(t / "stacks-1.txt") == "old");
  CHECK(ReadFile(t / "precious") == "precious");
  CHECK(WriteNumberedFile(t / "missing", "stacks", ".txt", "x").status().message() ==
        t / "missing/stacks-1.txt" + ": cannot open (No such file or directory)");
}

TEST_CASE("WriteNumberedFile leaves no file it could not write whole", "[private_dir]") {
  testing::TempDir t;
  // A full file system, as a small /dev/shm is: writes past a byte fail (EFBIG
  // with SIGXFSZ ignored), for this process only and until put back.
  struct rlimit old {};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
  struct sigaction ignore {
  }, was{};
  ignore.sa_handler = SIG_IGN;
  REQUIRE(sigaction(SIGXFSZ, &ignore, &was) == 0);
  struct rlimit one = old;
  one.rlim_cur = 1;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &one) == 0);
  Result<std::string> p = WriteNumberedFile(t.path, "stacks", ".txt", "all the stacks");
  setrlimit(RLIMIT_FSIZE, &old);
  sigaction(SIGXFSZ, &was, nullptr);
  REQUIRE(!p.ok());
  CHECK(p.status().message() == t / "stacks-1.txt" + ": cannot write (File too large)");
  CHECK(fs::is_empty(t.path));
}

TEST_CASE("WriteTempFile: an unpredictable new name, mode 0600", "[private_dir]") {
  testing::TempDir t;
  Result<std::string> a = WriteTempFile(t.path, "dlaunch-hosts-", ".x", "localhost slots=4\n");
  Result<std::string> b = WriteTempFile(t.path, "dlaunch-hosts-", ".x", "");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a != *b);
  CHECK(a->starts_with(t / "dlaunch-hosts-"));
  CHECK(a->ends_with(".x"));
  CHECK(a->size() == (t / "dlaunch-hosts-").size() + 6 + 2);
  CHECK(ReadFile(*a) == "localhost slots=4\n");
  CHECK((Lstat(*a).st_mode & 07777) == 0600);
  Status s = WriteTempFile(t / "missing", "p-", "", "x").status();
  CHECK(s.code() == Code::kIo);
  CHECK(s.message().starts_with(t / "missing/p-"));
  CHECK(s.message().ends_with(": cannot create (No such file or directory)"));
}

}  // namespace dlaunch::launcher
