#include "launcher/process/watch_helper.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "launcher/core/text.hpp"
#include "launcher/process/process.hpp"
#include "launcher/watchdog/job_mark.hpp"

extern char** environ;

namespace dlaunch::launcher {

namespace {

// Of what a program that is not watching wrote, this much is kept (and the
// start of it quoted): enough for one complaint of its own.
constexpr size_t kKeptOutput = 512;
constexpr size_t kQuotedOutput = 120;

enum class Answer { kWatching, kEnded, kSilent };

// Reads the helper's output until `answer` comes first (kWatching), EOF
// (kEnded: it exited or closed its output) or `limit` (kSilent). What it wrote
// otherwise goes to `said`, up to kKeptOutput bytes.
Answer AwaitAnswer(int fd, std::chrono::milliseconds limit, const std::string& answer, std::string* said) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Answer::kSilent;
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno != EINTR) return Answer::kSilent;
    if (r <= 0) continue;
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Answer::kEnded;
    said->append(buf, std::min(static_cast<size_t>(n), kKeptOutput - said->size()));
    // The answer is one write of less than PIPE_BUF, so it arrives whole, first.
    if (*said == answer) return Answer::kWatching;
    if (said->size() >= kKeptOutput) return Answer::kSilent;  // a flood is no answer either
  }
}

// What a program that is not watching wrote, for the message: someone else's
// output, so escaped, on one short line.
std::string Quoted(std::string said) {
  while (!said.empty() && (said.back() == '\n' || said.back() == '\r')) said.pop_back();
  return PrintablePrefix(said, kQuotedOutput);
}

// "exit status 0", "killed by SIGKILL: its output": how it ended, for the message.
std::string HowItEnded(int status, const std::string& said) {
  std::string how = WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                      : fmt::format("killed by {}", SignalName(WTERMSIG(status)));
  if (!said.empty()) how += ": " + Quoted(said);
  return how;
}

}  // namespace

Result<WatchHelper> StartWatchHelper(const std::string& helper, const WatchOrders& orders,
                                     const std::string& second_stage, std::chrono::milliseconds limit,
                                     int second_stage_fd) {
  if (orders.mark_entry.size() > kMaxMarkEntry)
    return Status::InvalidArgument(fmt::format("{}: a job mark of {} bytes", helper, orders.mark_entry.size()));
  // A challenge that only a program that read its orders can give back.
  Result<std::string> challenge = NewJobMark();
  if (!challenge.ok()) return Status::Io(fmt::format("{}: {}", helper, challenge.status().message()));
  Result<Pipe> to = MakePipe();
  if (!to.ok()) return Status::Io(fmt::format("{}: {}", helper, to.status().message()));
  Result<Pipe> from = MakePipe();
  if (!from.ok()) {
    close(to->read_fd);
    close(to->write_fd);
    return Status::Io(fmt::format("{}: {}", helper, from.status().message()));
  }
  // Written before the helper starts: an empty pipe takes the whole record at
  // once, and no reader can have gone yet (no SIGPIPE).
  std::string record = WatchMarkRecord(WatchRecord{*challenge, orders.mark_entry});
  bool wrote = write(to->write_fd, record.data(), record.size()) == static_cast<ssize_t>(record.size());
  int write_error = errno;
  SpawnSpec spec;
  spec.exe = helper;
  spec.args = WatchArgs(orders);
  spec.args.push_back(second_stage);
  // The launcher's environment (no job mark is in it): a sanitizer build's
  // options (log_path) reach the watchdog too.
  for (char** e = environ; *e != nullptr; ++e) spec.env.emplace_back(*e);
  spec.stdin_fd = to->read_fd;
  spec.stdout_fd = from->write_fd;
  spec.stderr_fd = from->write_fd;  // a stale helper's complaint says what is wrong
  spec.die_with_launcher = false;
  spec.keep_fd = second_stage_fd;
  Result<int> pid =
      wrote ? SpawnWorker(spec)
            : Result<int>(Status::Io(fmt::format("{}: orders pipe: {}", helper, std::strerror(write_error))));
  close(to->read_fd);
  close(from->write_fd);
  if (!pid.ok()) {
    close(to->write_fd);
    close(from->read_fd);
    return Status::Io(pid.status().message());  // "HELPER: cannot start (...)"
  }
  std::string said;
  Answer answer = AwaitAnswer(from->read_fd, limit, WatchAnswer(*challenge), &said);
  // Once it has answered it writes nothing more there (its output goes to /dev/null).
  close(from->read_fd);
  if (answer == Answer::kWatching) return WatchHelper{*pid, to->write_fd};
  close(to->write_fd);
  // Gone or going: a program that closed its output but runs on is killed
  // too, so that the wait below is not for ever.
  kill(*pid, SIGKILL);
  int status = 0;
  while (waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (answer == Answer::kSilent)
    return Status::Io(fmt::format("{}: no answer within {} ms{}, so it was killed", helper, limit.count(),
                                  said.empty() ? "" : " (it wrote: " + Quoted(said) + ")"));
  return Status::Io(fmt::format("{}: ended before it was watching ({})", helper, HowItEnded(status, said)));
}

}  // namespace dlaunch::launcher
