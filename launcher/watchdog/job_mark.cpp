#include "launcher/watchdog/job_mark.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "launcher/watchdog/proc_table.hpp"

namespace dlaunch::launcher {
namespace {

// Default: the pause between two rounds of KillMarked (a SIGKILLed process
// takes a moment to leave the table).
constexpr std::chrono::milliseconds kRoundPause{10};

// /proc/PID/environ up to kJobMarkEnvBytes; empty when the process has gone, is
// a zombie or is not ours to read.
std::string ReadEnviron(const char* pid) {
  return ReadProcFile(fmt::format("/proc/{}/environ", pid), kJobMarkEnvBytes).value_or("");
}

bool IsPid(const char* name, int& pid) {
  size_t len = std::strlen(name);
  auto [p, ec] = std::from_chars(name, name + len, pid);
  return ec == std::errc() && p == name + len && pid > 0;
}

}  // namespace

Result<std::string> NewJobMark() {
  // getrandom, not OpenSSL: the mark must be unique, not secret (a process
  // that forges it only gets itself killed), and launcher/process does not
  // link OpenSSL.
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::Io(fmt::format("job mark: no random bytes ({})", std::strerror(errno)));
    got += static_cast<size_t>(n);
  }
  std::string mark;
  for (unsigned char b : bytes) mark += fmt::format("{:02x}", b);
  return mark;
}

bool HasEnvEntry(std::string_view environ, std::string_view entry) {
  if (entry.empty()) return false;
  for (size_t at = 0; at < environ.size();) {
    size_t end = environ.find('\0', at);
    if (end == std::string_view::npos) end = environ.size();
    if (environ.substr(at, end - at) == entry) return true;
    at = end + 1;
  }
  return false;
}

namespace {

// One marked process, held by a pidfd where the kernel has them (5.3+): the
// pidfd is opened before the environment is read, so a signal through it
// reaches the process that was read or, if that one has gone and its pid was
// reused meanwhile, no process at all.
struct Marked {
  int pid = 0;
  int pidfd = -1;
};

std::vector<Marked> FindMarked(std::string_view entry, int skip) {
  std::vector<Marked> out;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return out;
  int self = getpid();
  while (dirent* e = readdir(dir)) {
    int pid = 0;
    if (!IsPid(e->d_name, pid) || pid == self || pid == skip) continue;
    int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (HasEnvEntry(ReadEnviron(e->d_name), entry))
      out.push_back({pid, pidfd});
    else if (pidfd >= 0)
      close(pidfd);
  }
  closedir(dir);
  return out;
}

}  // namespace

std::vector<int> MarkedProcesses(std::string_view entry, int skip) {
  std::vector<int> out;
  for (Marked m : FindMarked(entry, skip)) {
    out.push_back(m.pid);
    if (m.pidfd >= 0) close(m.pidfd);
  }
  return out;
}

int KillMarked(std::string_view entry, int skip, int rounds) {
  std::set<int> signalled;
  for (int i = 0; i < rounds; ++i) {
    std::vector<Marked> marked = FindMarked(entry, skip);
    if (marked.empty()) break;
    for (Marked m : marked) {
      if (m.pidfd >= 0) {
        syscall(SYS_pidfd_send_signal, m.pidfd, SIGKILL, nullptr, 0);
        close(m.pidfd);
      } else {
        kill(m.pid, SIGKILL);
      }
      signalled.insert(m.pid);
    }
    std::this_thread::sleep_for(kRoundPause);
  }
  return static_cast<int>(signalled.size());
}

}  // namespace dlaunch::launcher
