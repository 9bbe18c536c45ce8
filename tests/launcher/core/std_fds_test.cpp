#include "launcher/core/std_fds.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

using namespace dlaunch::launcher;

namespace {

// Runs `body` in a forked child with the descriptors in `closed` closed, and
// returns what it wrote to its report pipe (never on 0-2), or "exit N" when it
// ended without a report. The child calls only what a forked child of a test
// process may: no Catch2 there.
template <typename Body>
std::string InChildWithClosed(const std::vector<int>& closed, Body body) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  int report = fcntl(fds[1], F_DUPFD_CLOEXEC, 10);
  REQUIRE(report >= 10);
  close(fds[1]);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    for (int fd : closed) close(fd);
    std::string text = body();
    ssize_t ignored = write(report, text.data(), text.size());
    (void)ignored;
    _exit(0);
  }
  close(report);
  std::string got;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got.empty()) return "exit " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  return got;
}

// For each of 0-2: "null" (/dev/null, inheritable), "closed", "cloexec" or "other".
std::string DescribeStandardFds() {
  struct stat null_st {};
  stat("/dev/null", &null_st);
  std::string out;
  for (int fd = 0; fd <= 2; ++fd) {
    struct stat st {};
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0)
      out += "closed ";
    else if ((flags & FD_CLOEXEC) != 0)
      out += "cloexec ";
    else if (fstat(fd, &st) == 0 && st.st_rdev == null_st.st_rdev && S_ISCHR(st.st_mode))
      out += "null ";
    else
      out += "other ";
  }
  return out;
}

// `text` split at spaces.
std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  size_t at = 0;
  for (size_t space; (space = text.find(' ', at)) != std::string::npos; at = space + 1)
    words.push_back(text.substr(at, space - at));
  if (at < text.size()) words.push_back(text.substr(at));
  return words;
}

}  // namespace

TEST_CASE("std fds: each closed standard descriptor gets /dev/null, the open ones are left alone", "[std_fds]") {
  // The test's own 0-2 as they are (ctest's pipes, a terminal): the child's open ones must stay so.
  std::vector<std::string> mine = Words(DescribeStandardFds());
  for (const std::vector<int>& closed : std::vector<std::vector<int>>{{0}, {1}, {2}, {0, 2}, {0, 1, 2}}) {
    std::string got = InChildWithClosed(closed, [] {
      dlaunch::Status s = OpenClosedStandardFds();
      if (!s.ok()) return s.message();
      int next = open("/dev/null", O_RDONLY);  // the next file opened lands above 2
      return DescribeStandardFds() + (next > 2 ? "next-above-2" : "next-on-a-standard-fd");
    });
    INFO("closed: " << closed.size() << " descriptors, the first " << closed[0] << "; got: " << got);
    std::vector<std::string> want = mine;
    for (int fd : closed) want[static_cast<size_t>(fd)] = "null";
    want.push_back("next-above-2");
    CHECK(Words(got) == want);
  }
}

TEST_CASE("std fds: a null device that cannot be opened is named, with the cause", "[std_fds]") {
  std::string got = InChildWithClosed({0}, [] {
    dlaunch::Status s = OpenClosedStandardFds("/nonexistent-dlaunch-test/null");
    return s.ok() ? std::string("ok") : s.message();
  });
  CHECK(got == "/nonexistent-dlaunch-test/null: cannot open (No such file or directory)");
  // With nothing closed there is nothing to open: no error either.
  CHECK(InChildWithClosed({}, [] {
          return OpenClosedStandardFds("/nonexistent-dlaunch-test/null").ok() ? std::string("ok")
                                                                              : std::string("error");
        }) == "ok");
}

TEST_CASE("std fds: a child's standard descriptors come from their sources across exec, whatever their numbers",
          "[std_fds]") {
  // Each case: the sources, as pipes/files opened after closing some of 0-2,
  // so that they land on standard numbers, close-on-exec as dlaunch opens them.
  // The child execs sh, which reports what it holds on 0, 1 and 2.
  for (const std::vector<int>& closed : std::vector<std::vector<int>>{{0}, {1}, {0, 1}, {0, 1, 2}, {}}) {
    std::string got = InChildWithClosed(closed, [] {
      // stdin: a pipe holding "in"; stdout and stderr: one file each. Opened in
      // this order, the lowest free numbers go to them.
      int in[2];
      if (pipe2(in, O_CLOEXEC) != 0) return std::string("pipe failed");
      char out_path[] = "/tmp/dlaunch-std-fds-XXXXXX";
      int out = mkostemp(out_path, O_CLOEXEC);
      char err_path[] = "/tmp/dlaunch-std-fds-XXXXXX";
      int err = mkostemp(err_path, O_CLOEXEC);
      if (write(in[1], "in", 2) != 2) return std::string("write failed");
      close(in[1]);
      std::string where = std::to_string(in[0]) + "," + std::to_string(out) + "," + std::to_string(err);
      pid_t pid = fork();
      if (pid == 0) {
        SetStandardFds({in[0], out, err});
        execl("/bin/sh", "sh", "-c", "read x; echo \"out:$x\"; echo \"err:$x\" >&2", static_cast<char*>(nullptr));
        _exit(127);
      }
      int status = 0;
      waitpid(pid, &status, 0);
      auto slurp = [](const char* path) {
        std::string text;
        int fd = open(path, O_RDONLY);
        char buf[64];
        for (ssize_t n; fd >= 0 && (n = read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
        if (fd >= 0) close(fd);
        unlink(path);
        return text;
      };
      return slurp(out_path) + slurp(err_path) + "(fds " + where + ")";
    });
    INFO("closed before: " << closed.size());
    CHECK(got.substr(0, got.find('(')) == "out:in\nerr:in\n");
  }
}
