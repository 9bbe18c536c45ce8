#include "launcher/process/process.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "launcher/core/system.hpp"
#include "launcher/process/watch_helper.hpp"
#include "launcher/watchdog/job_mark.hpp"

namespace dlaunch::launcher {

Watchdog::Watchdog(std::string helper, std::string second_stage)
    : helper_(std::move(helper)), second_stage_(std::move(second_stage)) {}

Watchdog::~Watchdog() {
  if (fd_ >= 0) close(fd_);
  // Stopped, it has left by now, or soon does and is init's to reap.
  if (pid_ > 0) waitpid(pid_, nullptr, WNOHANG);
}

std::string Watchdog::WatchHelperPath() {
  std::string helper = ProgramBeside("dlaunch-watch");
  return !helper.empty() && access(helper.c_str(), X_OK) == 0 ? helper : "";
}

Status Watchdog::Start(const std::string& cleanup_dir, const std::string& cleanup_file) {
  // Without a mark the watchdog still kills what was registered: a daemon
  // adopted in the last scan interval before a SIGKILL may then escape.
  Result<std::string> mark = NewJobMark();
  job_mark_ = mark.ok() ? *mark : "";
  WatchOrders orders{getpgrp(), mark.ok() ? fmt::format("{}={}", kJobMarkVar, *mark) : "", cleanup_dir, cleanup_file};
  // The watchdog is the launcher's child either way; every look for adopted
  // processes leaves it out by pid (launcher/process/adopted.cpp). A helper that
  // cannot start (gone since it was found, a noexec mount) or does not say that
  // it watches (a stale or foreign program) leaves the fork, and a note.
  if (!helper_.empty()) {
    // The helper keeps this very binary open, even once its path is replaced
    // by an upgrade: a descriptor of it, opened here and inherited, since a
    // process may always open its own /proc/self/exe, while another may not
    // open ours when we are not dumpable (file capabilities, set-user-ID).
    std::string second_stage = second_stage_;
    int self = -1;
    if (second_stage.empty()) {
      self = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
      second_stage = self >= 0 ? fmt::format("/proc/self/fd/{}", self) : fmt::format("/proc/{}/exe", getpid());
    }
    Result<WatchHelper> started = StartWatchHelper(helper_, orders, second_stage, kWatchHelperAnswerTimeout, self);
    if (self >= 0) close(self);
    if (started.ok()) {
      fd_ = started->orders_fd;
      pid_ = started->pid;
      return Status::Ok();
    }
    fallback_note_ = fmt::format("{}; the watchdog is a fork of dlaunch instead", started.status().message());
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::Io(fmt::format("watchdog pipe: {}", std::strerror(errno)));
  pid_t watch = fork();
  if (watch < 0) {
    int err = errno;
    close(fds[0]);
    close(fds[1]);
    return Status::Io(fmt::format("watchdog fork: {}", std::strerror(err)));
  }
  if (watch == 0) {
    close(fds[1]);
    RunWatch(fds[0], orders);
  }
  // Both sides set its group, so that it has left the launcher's before Start
  // returns: a SIGKILL of that group must not take the watchdog with it.
  setpgid(watch, watch);
  close(fds[0]);
  fd_ = fds[1];
  pid_ = watch;
  return Status::Ok();
}

void Watchdog::Send(WatchOp op, int id, uint64_t start_time) {
  if (fd_ < 0) return;
  WatchMessage m{op, id, start_time};
  // A 16-byte write to a pipe is atomic; if the watchdog is gone there is nothing to do.
  ssize_t ignored = write(fd_, &m, sizeof m);
  (void)ignored;
}

void Watchdog::Add(int pgid) {
  bool first = groups_.empty();
  if (first) groups_since_ = std::chrono::steady_clock::now();
  groups_.insert(pgid);
  Send(WatchOp::kAddGroup, pgid);
  if (first && on_groups_) on_groups_();
}
void Watchdog::Remove(int pgid) {
  groups_.erase(pgid);
  Send(WatchOp::kRemoveGroup, pgid);
}
void Watchdog::AddProcess(int pid, uint64_t start_time) { Send(WatchOp::kAddProcess, pid, start_time); }
void Watchdog::RemoveProcess(int pid) { Send(WatchOp::kRemoveProcess, pid); }

void Watchdog::Stop() {
  Send(WatchOp::kStop, 0);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

}  // namespace dlaunch::launcher
