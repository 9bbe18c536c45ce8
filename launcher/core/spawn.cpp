// Boost.Process compiles its vfork path (bp::posix::use_vfork) only where the
// feature macros predate POSIX 2008, which dropped vfork; glibc has it always.
#define BOOST_POSIX_HAS_VFORK 1

#include "launcher/core/spawn.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <system_error>

#include <boost/process/args.hpp>
#include <boost/process/child.hpp>
#include <boost/process/exe.hpp>
#include <boost/process/extend.hpp>
#include <boost/process/posix.hpp>
#include <boost/process/search_path.hpp>
#include <fmt/format.h>

#include "launcher/core/std_fds.hpp"

namespace dlaunch::launcher {

namespace bp = boost::process;

namespace {

// Runs in the child between fork and exec, so only async-signal-safe calls.
void SetUpChild(const SpawnSpec& spec, pid_t parent, const cpu_set_t* cpus) {
  setpgid(0, 0);
  if (spec.die_with_launcher) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);  // the launcher died before prctl took effect
  }
  SetStandardFds({spec.stdin_fd, spec.stdout_fd, spec.stderr_fd});
  if (cpus != nullptr) sched_setaffinity(0, sizeof(cpu_set_t), cpus);
  // Nothing of dlaunch's own goes past exec: its sockets (the live view, a hosted
  // coordinator's listener, MASTER_PORT's hold) are opened without CLOEXEC by
  // Asio, and a worker holding them kept a dead dlaunch's listener answering
  // (a stale `dlaunch status` socket reset, a port still bound). CLOEXEC rather
  // than close, so that Boost.Process's exec-error pipe still reports. Before
  // Linux 5.11 (no close_range), the first 4096 by hand.
  if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
    for (int fd = 3; fd < 4096; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
  if (spec.keep_fd >= 3) fcntl(spec.keep_fd, F_SETFD, 0);
  // The child shares the launcher's memory until exec (vfork), so a handler of
  // the launcher's must not run here: a signal caught now (a Ctrl-C to the
  // terminal's group, before setpgid took effect) would write to the launcher's
  // signal pipe and count twice there. SpawnWorker blocks every signal around
  // the vfork; each caught one goes back to SIG_DFL before they are unblocked,
  // as posix_spawn does. The launcher ignores SIGPIPE, and an ignored signal
  // survives exec, so it is restored too.
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction now {};
    if (sigaction(sig, nullptr, &now) != 0) continue;  // SIGKILL, SIGSTOP, libc's own
    bool caught = (now.sa_flags & SA_SIGINFO) != 0 || now.sa_handler != SIG_DFL;
    if (caught && (sig == SIGPIPE || now.sa_handler != SIG_IGN)) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigaction(sig, &dfl, nullptr);
    }
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

}  // namespace

Result<int> SpawnWorker(const SpawnSpec& spec) {
  pid_t parent = getpid();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : spec.cpus) CPU_SET(c, &set);
  const cpu_set_t* cpus = spec.cpus.empty() ? nullptr : &set;

  // The environment goes to execve as it is: Boost.Process's own environment
  // type finds each name by a linear search, so building one from a worker's
  // sixty variables cost a few thousand string comparisons a start.
  std::vector<char*> envp;
  envp.reserve(spec.env.size() + 1);
  for (const std::string& kv : spec.env) envp.push_back(const_cast<char*>(kv.c_str()));
  envp.push_back(nullptr);
  // vfork: the launcher's page tables are not copied for a child that only
  // execs (a fork of the launcher costs milliseconds on a virtual machine, and
  // a thousand agents on one machine pay it each). SetUpChild writes to nothing
  // in memory and makes only system calls, as a vfork child must; Boost.Process
  // reports a failed exec through memory the two share.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  std::error_code ec;
  bp::child child(
      bp::exe = spec.exe, bp::args = spec.args, bp::posix::use_vfork,
      bp::extend::on_setup = [&](auto& exec) { exec.env = envp.data(); },
      bp::extend::on_exec_setup = [&](auto&) { SetUpChild(spec, parent, cpus); }, ec);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (ec) return Status::Io(fmt::format("{}: cannot start ({})", spec.exe, ec.message()));
  int pid = child.id();
  // The launcher reaps with waitpid(-1) (it is a subreaper); Boost must not.
  child.detach();
  return pid;
}

Result<Pipe> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::Io(fmt::format("pipe: {}", std::strerror(errno)));
  // Linux's default size: the pipe is charged to the user, so it grows only
  // once its stream is busy (Streams, PipeBudget).
  return Pipe{fds[0], fds[1]};
}

namespace {

void CloseFds(std::initializer_list<int> fds) {
  for (int fd : fds)
    if (fd >= 0) close(fd);
}

}  // namespace

Result<PipedChild> SpawnPiped(SpawnSpec spec, bool with_stdin) {
  Pipe in, out, err;
  for (Pipe* p : {&in, &out, &err}) {
    if (p == &in && !with_stdin) continue;
    Result<Pipe> made = MakePipe();
    if (!made.ok()) {
      CloseFds({in.read_fd, in.write_fd, out.read_fd, out.write_fd});
      return made.status();
    }
    *p = *made;
  }
  spec.stdin_fd = in.read_fd;
  spec.stdout_fd = out.write_fd;
  spec.stderr_fd = err.write_fd;
  Result<int> pid = SpawnWorker(spec);
  CloseFds({in.read_fd, out.write_fd, err.write_fd});  // the child's ends
  if (!pid.ok()) {
    CloseFds({in.write_fd, out.read_fd, err.read_fd});
    return pid.status();
  }
  return PipedChild{*pid, in.write_fd, out.read_fd, err.read_fd};
}

Result<std::string> ResolveCommand(const std::string& name) {
  if (name.find('/') == std::string::npos) {
    boost::filesystem::path p = bp::search_path(name);
    if (p.empty()) return Status::NotFound(fmt::format("{}: command not found", name));
    return p.string();
  }
  if (access(name.c_str(), F_OK) != 0) return Status::NotFound(fmt::format("{}: no such file", name));
  if (access(name.c_str(), X_OK) != 0) return Status::InvalidArgument(fmt::format("{}: not executable", name));
  return name;
}

}  // namespace dlaunch::launcher
