#include "launcher/modes/mpi_bootstrap.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

#include "launcher/core/exit.hpp"
#include "launcher/core/std_fds.hpp"
#include "launcher/core/system.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

namespace {

// The helper prints one short line; more than this is not it.
constexpr size_t kMaxBootstrapLine = 4096;

bool ParseInt(std::string_view s, int& out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && ptr == s.data() + s.size();
}

// The helper beside this binary, or on PATH when /proc/self/exe cannot be read.
std::string HelperPath() {
  std::string beside = ProgramBeside(kMpiBootstrapName);
  return beside.empty() ? kMpiBootstrapName : beside;
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by " + SignalName(WTERMSIG(status));
  return "ended";
}

}  // namespace

Result<MpiShared> ParseMpiBootstrapLine(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  auto bad = [&] {
    return Status::InvalidArgument(
        fmt::format("{}: expected 'RANK SIZE VALUE', got '{}'", kMpiBootstrapName, line.substr(0, 200)));
  };
  size_t a = line.find(' ');
  if (a == std::string_view::npos) return bad();
  size_t b = line.find(' ', a + 1);
  if (b == std::string_view::npos) return bad();
  MpiShared out;
  if (!ParseInt(line.substr(0, a), out.rank) || !ParseInt(line.substr(a + 1, b - a - 1), out.size) || out.rank < 0 ||
      out.size < 1 || out.rank >= out.size || b + 1 >= line.size())
    return bad();
  out.value = std::string(line.substr(b + 1));
  return out;
}

Result<MpiShared> MpiShareFromRankZero(const std::string& helper, const std::string& offer,
                                       std::chrono::milliseconds limit) {
  if (access(helper.c_str(), X_OK) != 0)
    return Status::NotFound(
        fmt::format("{}: not found ({}), so this dlaunch cannot bootstrap through MPI "
                    "(it was built without MPI)",
                    helper, std::strerror(errno)));
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::Io(fmt::format("{}: pipe: {}", helper, std::strerror(errno)));
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return Status::Io(fmt::format("{}: fork: {}", helper, std::strerror(errno)));
  }
  if (pid == 0) {
    // The helper must not outlive a dlaunch killed while MPI_Init waits.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    SetStandardFds({devnull, fds[1], -1});
    const char* argv[] = {helper.c_str(), offer.c_str(), nullptr};
    execv(helper.c_str(), const_cast<char* const*>(argv));
    _exit(kExitNotFound);
  }
  close(fds[1]);

  std::string line;
  auto deadline = std::chrono::steady_clock::now() + limit;
  bool timed_out = false;
  while (line.find('\n') == std::string::npos && line.size() < kMaxBootstrapLine) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[512];
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the helper ended
    line.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return Status::Timeout(fmt::format("{}: no answer from rank 0 within {}s", helper, limit.count() / 1000));
  size_t nl = line.find('\n');
  if (nl == std::string::npos || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == kExitNotFound)
      return Status::Io(fmt::format("{}: cannot be run", helper));
    return Status::Io(fmt::format("{} {}", helper, Describe(status)));
  }
  return ParseMpiBootstrapLine(std::string_view(line).substr(0, nl));
}

Result<std::string> EndpointThroughMpi(const RendezvousPlan& r) {
  auto fail = [](const std::string& why) {
    return Status::InvalidArgument(fmt::format("under mpirun: {} (or give --rdzv-endpoint HOST:PORT)", why));
  };
  Result<PortReservation> port = PortReservation::AnyFree();
  if (!port.ok()) return fail(port.status().message());
  std::string offer = fmt::format("{}:{}", r.local_addr.empty() ? HostName() : r.local_addr, port->port());
  port->Release();  // the coordinator binds it next
  Result<MpiShared> shared = MpiShareFromRankZero(HelperPath(), offer, r.join_timeout);
  if (!shared.ok()) return fail(shared.status().message());
  // The helper must have joined as this dlaunch's own rank, or rank 0 is not who
  // the plan says.
  if (shared->rank != r.requested_node_rank || shared->size != r.max_nodes)
    return fail(fmt::format("the MPI bootstrap ran as rank {} of {}, but OMPI_COMM_WORLD_RANK/SIZE say {} of {}",
                            shared->rank, shared->size, r.requested_node_rank, r.max_nodes));
  return shared->value;
}

}  // namespace dlaunch::launcher
