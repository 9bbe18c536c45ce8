#include "launcher/health/health_check.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>

#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <fmt/format.h>

#include "launcher/core/event_loop.hpp"
#include "launcher/core/spawn.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

namespace asio = boost::asio;

namespace {

// Without pidfd_open (before Linux 5.3) a check's exit is polled this often.
constexpr std::chrono::milliseconds kExitPoll{50};
// After a check ends, what is left of its group is killed and reaped; these
// are the looks at it, until none is left.
constexpr std::chrono::milliseconds kSweepPoll{20};
constexpr int kSweepRounds = 50;

void KeepTail(std::string& tail, const char* data, size_t n) {
  tail.append(data, n);
  if (tail.size() > kCheckOutputKeep) tail.erase(0, tail.size() - kCheckOutputKeep);
}

bool Blank(std::string_view line) { return line.find_first_not_of(" \t\r\n") == std::string_view::npos; }

}  // namespace

std::string LastLine(const std::string& output) {
  std::string_view rest = output;
  while (!rest.empty()) {
    size_t nl = rest.find_last_of('\n', rest.size() - 1);
    std::string_view line = nl == std::string_view::npos ? rest : rest.substr(nl + 1);
    if (!Blank(line)) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
      return PrintablePrefix(line, kCheckLastLineMax);
    }
    if (nl == std::string_view::npos) break;
    rest = rest.substr(0, nl);
  }
  return "";
}

std::string CheckOutcome::Describe() const { return last_line.empty() ? how : fmt::format("{}: {}", how, last_line); }

struct ProcessHealthChecker::Running {
  int pid = -1;
  SteadyTime started{};
  std::function<void(CheckOutcome)> done;
  std::unique_ptr<asio::posix::stream_descriptor> out;    // the read end of its stdout and stderr
  std::unique_ptr<asio::posix::stream_descriptor> pidfd;  // readable once it has exited; null without pidfd_open
  std::unique_ptr<Timer> deadline;                        // the timeout, then SIGTERM's grace
  std::unique_ptr<Timer> poll;                            // without a pidfd: looks for its exit
  std::array<char, 4096> buf{};
  std::string tail;
  bool timed_out = false;
  Lifetime life;  // last: expires first
};

ProcessHealthChecker::ProcessHealthChecker(asio::io_context& io, Timers& timers, HealthCheckSpec spec)
    : io_(io), timers_(timers), spec_(std::move(spec)), sweep_(timers.NewTimer()) {}

ProcessHealthChecker::~ProcessHealthChecker() { Cancel(); }

int ProcessHealthChecker::pid() const { return run_ ? run_->pid : -1; }

void ProcessHealthChecker::Run(std::function<void(CheckOutcome)> done) {
  auto r = std::make_unique<Running>();
  r->done = std::move(done);
  r->started = timers_.Now();
  r->deadline = timers_.NewTimer();
  Running* raw = r.get();
  auto fail_now = [&](const std::string& why) {
    CheckOutcome o;
    o.how = fmt::format("cannot start ({})", why);
    // From a handler of its own, as every answer.
    asio::post(io_, [this, o = std::move(o), alive = raw->life.token()]() mutable {
      if (!alive.expired()) Finish(std::move(o));
    });
  };
  run_ = std::move(r);

  Result<Pipe> pipe = MakePipe();
  if (!pipe.ok()) return fail_now(pipe.status().message());
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  SpawnSpec spec;
  spec.exe = "/bin/sh";
  spec.args = {"-c", spec_.command};
  spec.env = spec_.env;
  spec.stdin_fd = null_fd;
  spec.stdout_fd = pipe->write_fd;
  spec.stderr_fd = pipe->write_fd;
  Result<int> pid = SpawnWorker(spec);
  close(pipe->write_fd);
  if (null_fd >= 0) close(null_fd);
  if (!pid.ok()) {
    close(pipe->read_fd);
    return fail_now(pid.status().message());
  }
  raw->pid = *pid;
  fcntl(pipe->read_fd, F_SETFL, fcntl(pipe->read_fd, F_GETFL) | O_NONBLOCK);
  raw->out = std::make_unique<asio::posix::stream_descriptor>(io_, pipe->read_fd);

  // Its output, kept to the last few KiB, until the pipe closes.
  ReadMore(raw);

  // Its exit: a pidfd turns readable (Linux 5.3+), else a poll.
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, *pid, 0));
  if (pidfd >= 0) {
    raw->pidfd = std::make_unique<asio::posix::stream_descriptor>(io_, pidfd);
    raw->pidfd->async_wait(asio::posix::stream_descriptor::wait_read,
                           [this, alive = raw->life.token()](boost::system::error_code ec) {
                             if (!ec && !alive.expired()) OnExit();
                           });
  } else {
    raw->poll = timers_.NewTimer();
    raw->poll->At(timers_.Now() + kExitPoll, [this] { OnExit(); });
  }

  raw->deadline->At(raw->started + spec_.timeout, [this, raw] {
    raw->timed_out = true;
    kill(-raw->pid, SIGTERM);
    raw->deadline->At(timers_.Now() + spec_.kill_grace, [raw] { kill(-raw->pid, SIGKILL); });
  });
}

void ProcessHealthChecker::ReadMore(Running* r) {
  r->out->async_read_some(asio::buffer(r->buf), [r, alive = r->life.token()](boost::system::error_code ec, size_t n) {
    if (alive.expired()) return;
    KeepTail(r->tail, r->buf.data(), n);
    if (ec) {
      boost::system::error_code ignored;
      r->out->close(ignored);
      return;
    }
    ReadMore(r);
  });
}

void ProcessHealthChecker::OnExit() {
  Running* r = run_.get();
  int status = 0;
  pid_t got = waitpid(r->pid, &status, WNOHANG);
  if (got == 0) {
    // Not yet (a poll, or a wake-up that came early): look again.
    if (r->pidfd) {
      r->pidfd->async_wait(asio::posix::stream_descriptor::wait_read,
                           [this, alive = r->life.token()](boost::system::error_code ec) {
                             if (!ec && !alive.expired()) OnExit();
                           });
    } else {
      r->poll->At(timers_.Now() + kExitPoll, [this] { OnExit(); });
    }
    return;
  }
  bool lost = got < 0;  // reaped by another waitpid(-1) of this process: its status is gone
  // What it wrote and the pipe still holds (a reader's turn may not have come).
  if (r->out && r->out->is_open()) {
    for (int i = 0; i < 64; ++i) {
      ssize_t n = read(r->out->native_handle(), r->buf.data(), r->buf.size());
      if (n <= 0) break;
      KeepTail(r->tail, r->buf.data(), static_cast<size_t>(n));
    }
  }
  CheckOutcome o;
  o.output = std::move(r->tail);
  o.last_line = LastLine(o.output);
  o.took = std::chrono::duration_cast<std::chrono::milliseconds>(timers_.Now() - r->started);
  if (r->timed_out) {
    o.how = fmt::format("did not finish within {}; killed", SecondsText(spec_.timeout));
  } else if (lost) {
    o.how = "ended, but its exit status was lost";
  } else if (WIFEXITED(status)) {
    o.ok = WEXITSTATUS(status) == 0;
    o.how = o.ok ? "passed" : fmt::format("exited with code {}", WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    o.how = fmt::format("was killed by {}", SignalName(WTERMSIG(status)));
  } else {
    o.how = "ended in an unknown way";
  }
  Finish(std::move(o));
}

void ProcessHealthChecker::Finish(CheckOutcome outcome) {
  std::function<void(CheckOutcome)> done = std::move(run_->done);
  int pgid = run_->pid;
  run_.reset();
  // Whatever the check left in its group (a `sleep &`) goes with it.
  if (pgid > 0) {
    kill(-pgid, SIGKILL);
    Sweep(pgid, kSweepRounds);
  }
  done(std::move(outcome));
}

void ProcessHealthChecker::Cancel() {
  if (!run_) return;
  int pgid = run_->pid;
  run_.reset();
  if (pgid > 0) {
    kill(-pgid, SIGKILL);
    Sweep(pgid, kSweepRounds);
  }
}

// Reaps the group's processes that are this process's children (its leader; as
// a subreaper, also the orphans that came here), until none of the group is
// left or the rounds run out.
void ProcessHealthChecker::Sweep(int pgid, int rounds) {
  while (waitpid(-pgid, nullptr, WNOHANG) > 0) {
  }
  if (kill(-pgid, 0) != 0 && errno == ESRCH) return;
  if (rounds <= 0) return;
  kill(-pgid, SIGKILL);
  sweep_->At(timers_.Now() + kSweepPoll, [this, pgid, rounds] { Sweep(pgid, rounds - 1); });
}

}  // namespace dlaunch::launcher
