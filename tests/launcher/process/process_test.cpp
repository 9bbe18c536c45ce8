#include "launcher/process/process.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

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
  // The worker's mask is empty: SigBlk in its status is all zeros.
  Result<PipedChild> child = SpawnPiped(SpawnTestShell("grep SigBlk /proc/self/status | tr -d '\\t '"), false);
  pthread_sigmask(SIG_SETMASK, nullptr, &after);
  REQUIRE(child.ok());
  CHECK(SpawnTestReadAll(child->stdout_fd) == "SigBlk:0000000000000000\n");
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

}  // namespace dlaunch::launcher
