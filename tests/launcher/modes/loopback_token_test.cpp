// A user's loopback token: created once, exclusively, in a private directory;
// read back by the user's other agents; refused when anything about it is wrong.
#include "launcher/modes/loopback_token.hpp"
#include "launcher/core/private_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

namespace dlaunch::launcher {

namespace {

// A fresh directory whose `sub` is where the token goes; removed at the end.
struct TokenDir {
  TokenDir() {
    char tmpl[] = "/tmp/dlaunch-token-test-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    root = tmpl;
    dir = root + "/sub";
  }
  ~TokenDir() { std::filesystem::remove_all(root); }
  std::string Path() const { return dir + "/rdzv-token"; }
  std::string root;
  std::string dir;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Write(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  REQUIRE(chmod(path.c_str(), mode) == 0);
}

}  // namespace

TEST_CASE("loopback token: made once, mode 0600, in a 0700 directory, then read back", "[loopback_token]") {
  TokenDir t;
  Result<std::string> first = LoopbackToken(t.dir, getuid());
  REQUIRE(first.ok());
  CHECK(first->size() == 64);
  CHECK(Slurp(t.Path()) == *first + "\n");
  struct stat st {};
  REQUIRE(stat(t.dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  REQUIRE(stat(t.Path().c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  Result<std::string> again = LoopbackToken(t.dir, getuid());
  REQUIRE(again.ok());
  CHECK(*again == *first);
  // Nothing else is left in the directory (the temporary file is gone).
  CHECK(std::distance(std::filesystem::directory_iterator(t.dir), {}) == 1);
}

TEST_CASE("loopback token: agents starting at once all get the same token", "[loopback_token]") {
  TokenDir t;
  constexpr int kAgents = 16;
  int fds[kAgents][2];
  for (auto& fd : fds) {
    REQUIRE(pipe(fd) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      Result<std::string> token = LoopbackToken(t.dir, getuid());
      std::string out = token.ok() ? *token : "error: " + token.status().message();
      ssize_t ignored = write(fd[1], out.data(), out.size());
      (void)ignored;
      _exit(0);
    }
    close(fd[1]);
  }
  std::set<std::string> seen;
  for (auto& fd : fds) {
    std::string got;
    char buf[256];
    for (ssize_t n; (n = read(fd[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    close(fd[0]);
    seen.insert(got);
  }
  while (wait(nullptr) > 0) {
  }
  REQUIRE(seen.size() == 1);
  CHECK(seen.begin()->size() == 64);
}

TEST_CASE("loopback token: what is refused, in one line naming it", "[loopback_token]") {
  TokenDir t;
  REQUIRE(mkdir(t.dir.c_str(), 0700) == 0);
  std::string path = t.Path();
  std::string token(64, 'a');
  uid_t me = getuid();
  SECTION("a directory open to others") {
    REQUIRE(chmod(t.dir.c_str(), 0777) == 0);
    CHECK(LoopbackToken(t.dir, me).status().message() ==
          t.dir + ": refused (mode 0777 lets other users in; 0700 expected)");
  }
  SECTION("a directory of another user") {
    CHECK(LoopbackToken(t.dir, me + 1).status().message() ==
          t.dir + ": refused (owned by uid " + std::to_string(me) + ", not " + std::to_string(me + 1) + ")");
  }
  SECTION("a symlink in the token's place, even to a good token") {
    Write(t.root + "/elsewhere", token + "\n", 0600);
    REQUIRE(symlink((t.root + "/elsewhere").c_str(), path.c_str()) == 0);
    CHECK(LoopbackToken(t.dir, me).status().message() == path + ": refused (a symlink)");
  }
  SECTION("a token file other users may read") {
    Write(path, token + "\n", 0644);
    CHECK(LoopbackToken(t.dir, me).status().message() ==
          path + ": refused (mode 0644 lets other users read it; 0600 expected)");
  }
  SECTION("a token file of another user") {
    if (getuid() != 0) return;  // only root can give a file away
    Write(path, token + "\n", 0600);
    REQUIRE(chown(path.c_str(), 65534, 65534) == 0);
    CHECK(LoopbackToken(t.dir, me).status().message() == path + ": refused (owned by uid 65534, not 0)");
  }
  SECTION("something dlaunch did not write") {
    Write(path, "hunter2\n", 0600);
    CHECK(LoopbackToken(t.dir, me).status().message() ==
          path + ": refused (not a token dlaunch wrote: expected 64 hex digits)");
  }
  SECTION("a FIFO, which is not waited on") {
    REQUIRE(mkfifo(path.c_str(), 0600) == 0);
    CHECK(LoopbackToken(t.dir, me).status().message() == path + ": refused (not a regular file)");
  }
  SECTION("a token dlaunch wrote is taken as it is") {
    Write(path, token + "\n", 0600);
    Result<std::string> got = LoopbackToken(t.dir, me);
    REQUIRE(got.ok());
    CHECK(*got == token);
  }
}

TEST_CASE("loopback token: which endpoints are loopback", "[loopback_token]") {
  boost::asio::io_context io;
  CHECK(IsLoopbackHost(io, "127.0.0.1"));
  CHECK(IsLoopbackHost(io, "127.0.0.2"));
  CHECK(IsLoopbackHost(io, "::1"));
  CHECK(IsLoopbackHost(io, "localhost"));
  CHECK_FALSE(IsLoopbackHost(io, "10.0.0.1"));
  CHECK_FALSE(IsLoopbackHost(io, "0.0.0.0"));
  CHECK(LoopbackTokenDir(1234) == DefaultTempParent() + "/dlaunch-1234");
}

}  // namespace dlaunch::launcher
