#include "launcher/process/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

namespace dlaunch::launcher {
namespace {

// All of `fd` until EOF, then closes it.
std::string SpawnTestReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

int SpawnTestWait(int pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

SpawnSpec SpawnTestShell(const std::string& script, std::vector<std::string> env = {"PATH=/usr/bin:/bin"}) {
  SpawnSpec spec;
  spec.exe = "/bin/sh";
  spec.args = {"-c", script};
  spec.env = std::move(env);
  return spec;
}

// The signal storm's handler notes whether it ran in a process other than the
// one that installed it: a vfork child, which shares that one's memory.
volatile sig_atomic_t storm_owner = 0;
volatile sig_atomic_t storm_ran_elsewhere = 0;
void StormHandler(int) {
  if (getpid() != storm_owner) storm_ran_elsewhere = 1;
}

}  // namespace

TEST_CASE("spawn: the worker gets exactly its argv and environment, and its exit code comes back", "[process]") {
  Result<PipedChild> child = SpawnPiped(SpawnTestShell("echo \"$0|$X|$HOME\"; echo err >&2; exit 3", {"X=a b"}), false);
  REQUIRE(child.ok());
  CHECK(SpawnTestReadAll(child->stdout_fd) == "/bin/sh|a b|\n");
  CHECK(SpawnTestReadAll(child->stderr_fd) == "err\n");
  int status = SpawnTestWait(child->pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
}

TEST_CASE("spawn: the environment reaches the worker entry for entry, in order, '=' in values and empty ones too",
          "[process]") {
  SpawnSpec spec;
  spec.exe = "/usr/bin/env";
  spec.env = {"Z=last?", "A=x=y", "EMPTY=", "SPACED=a  b", "A2=\x01\x7f"};
  Result<PipedChild> child = SpawnPiped(spec, false);
  REQUIRE(child.ok());
  CHECK(SpawnTestReadAll(child->stdout_fd) == "Z=last?\nA=x=y\nEMPTY=\nSPACED=a  b\nA2=\x01\x7f\n");
  close(child->stderr_fd);
  int status = SpawnTestWait(child->pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("spawn: the worker leads a process group of its own and holds none of the launcher's descriptors",
          "[process]") {
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);  // not CLOEXEC, as Asio's sockets are not
  Result<PipedChild> child =
      SpawnPiped(SpawnTestShell("cut -d' ' -f5 /proc/$$/stat; ls /proc/self/fd | sort -n | tr '\\n' ' '"), false);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  REQUIRE(child.ok());
  std::string out = SpawnTestReadAll(child->stdout_fd);
  SpawnTestReadAll(child->stderr_fd);
  SpawnTestWait(child->pid);
  CHECK(out.starts_with(std::to_string(child->pid) + "\n"));
  // 0-2, and the descriptor `ls` opened to list them.
  CHECK(out.substr(out.find('\n') + 1) == "0 1 2 3 ");
}

TEST_CASE("spawn: keep_fd is the one descriptor past 2 the worker holds, at its number", "[process]") {
  int pipe_fds[2];
  REQUIRE(pipe2(pipe_fds, O_CLOEXEC) == 0);  // close-on-exec, as the launcher's own are
  int other[2];
  REQUIRE(pipe(other) == 0);
  SpawnSpec spec = SpawnTestShell("ls /proc/self/fd | sort -n | tr '\\n' ' '");
  spec.keep_fd = pipe_fds[1];
  Result<PipedChild> child = SpawnPiped(spec, false);
  for (int fd : {pipe_fds[0], other[0], other[1]}) close(fd);
  REQUIRE(child.ok());
  std::string out = SpawnTestReadAll(child->stdout_fd);
  SpawnTestReadAll(child->stderr_fd);
  SpawnTestWait(child->pid);
  // 0-2, the kept one, and the descriptor `ls` opened to list them (the lowest free).
  int listing = pipe_fds[1] == 3 ? 4 : 3;
  std::vector<int> want = {0, 1, 2, std::min(listing, pipe_fds[1]), std::max(listing, pipe_fds[1])};
  std::string expected;
  for (int fd : want) expected += std::to_string(fd) + " ";
  CHECK(out == expected);
  close(pipe_fds[1]);
}

TEST_CASE("spawn: a command that cannot be executed is an error naming it", "[process]") {
  SpawnSpec spec;
  spec.exe = "/nonexistent/dlaunch-spawn-test";
  Result<int> pid = SpawnWorker(spec);
  REQUIRE(!pid.ok());
  CHECK(pid.status().message() == "/nonexistent/dlaunch-spawn-test: cannot start (No such file or directory)");
}

TEST_CASE("spawn: the launcher's signal mask and handlers are as they were, the worker's are clean", "[process]") {
  struct sigaction usr1 {};
  usr1.sa_handler = [](int) {};
  struct sigaction old_usr1 {};
  sigaction(SIGUSR1, &usr1, &old_usr1);
  sigset_t blocked, before, after;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &blocked, &before);
  pthread_sigmask(SIG_SETMASK, nullptr, &before);
  // The launcher ignores SIGPIPE, which would survive the exec.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old_pipe {};
  sigaction(SIGPIPE, &ignore, &old_pipe);
  // The worker's mask is empty: SigBlk in its status is all zeros. Its ignored
  // set (SigIgn, a hex mask where signal N is bit N-1) holds no SIGPIPE.
  Result<PipedChild> child =
      SpawnPiped(SpawnTestShell("grep -E 'SigBlk|SigIgn' /proc/self/status | tr -d '\\t '"), false);
  pthread_sigmask(SIG_SETMASK, nullptr, &after);
  sigaction(SIGPIPE, &old_pipe, nullptr);
  REQUIRE(child.ok());
  std::string status = SpawnTestReadAll(child->stdout_fd);
  CHECK(status.find("SigBlk:0000000000000000\n") != std::string::npos);
  size_t ign = status.find("SigIgn:");
  REQUIRE(ign != std::string::npos);
  unsigned long long ignored = std::stoull(status.substr(ign + 7, 16), nullptr, 16);
  CHECK((ignored & (1ULL << (SIGPIPE - 1))) == 0);
  SpawnTestReadAll(child->stderr_fd);
  SpawnTestWait(child->pid);
  CHECK(sigismember(&after, SIGUSR2) == 1);
  CHECK(sigismember(&after, SIGUSR1) == 0);
  struct sigaction now {};
  sigaction(SIGUSR1, nullptr, &now);
  CHECK(now.sa_handler == usr1.sa_handler);  // the child's reset was its own
  pthread_sigmask(SIG_UNBLOCK, &blocked, nullptr);
  sigaction(SIGUSR1, &old_usr1, nullptr);
}

TEST_CASE("spawn: a signal to the launcher's group while a worker starts runs none of the launcher's handlers in it",
          "[process]") {
  // Until the worker's setpgid it is in the launcher's group, and until its exec
  // it shares the launcher's memory: a Ctrl-C then ran the launcher's handler
  // there. A process of its own leads the group that the storm is sent to.
  pid_t tester = fork();
  REQUIRE(tester >= 0);
  if (tester == 0) {
    setpgid(0, 0);
    storm_owner = getpid();
    struct sigaction sa {};
    sa.sa_handler = StormHandler;
    sigaction(SIGUSR1, &sa, nullptr);
    std::atomic<bool> stop{false};
    std::thread storm([&stop] {
      while (!stop) kill(-getpgrp(), SIGUSR1);
    });
    int code = 0;
    for (int i = 0; i < 300 && code == 0 && storm_ran_elsewhere == 0; ++i) {
      SpawnSpec spec;
      spec.exe = "/bin/true";
      Result<int> pid = SpawnWorker(spec);
      if (!pid.ok())
        code = 2;
      else
        SpawnTestWait(*pid);
    }
    stop = true;
    storm.join();
    _exit(code != 0 ? code : storm_ran_elsewhere != 0 ? 1 : 0);
  }
  int status = SpawnTestWait(tester);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // 1: a handler ran in a worker before its exec
}

}  // namespace dlaunch::launcher
