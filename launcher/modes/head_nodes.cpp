#include "launcher/modes/head_nodes.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "launcher/core/exit.hpp"
#include "launcher/core/system.hpp"
#include "launcher/core/text.hpp"
#include "launcher/process/slurm_signals.hpp"

namespace dlaunch::launcher {
namespace {

namespace asio = boost::asio;
namespace rdzv = dlaunch::rendezvous;
using Clock = std::chrono::steady_clock;

// Default: how long an agent may take past --shutdown-timeout to finish once the
// job has ended, before its connection is killed.
constexpr std::chrono::seconds kFinishSlack{10};
// Default: bytes per read of one agent pipe.
constexpr size_t kReadSize = size_t{1} << 16;
// Default: how long the coordinator waits for the agents to confirm a signal
// passed on; nothing waits on the answer, so this only bounds the open query.
constexpr std::chrono::seconds kPassOnTimeout{10};
// The high bit marks a pass-on query's tag (the signal below it).
constexpr std::uint64_t kPassOnTagBit = std::uint64_t{1} << 63;

}  // namespace

HeadNodes::HeadNodes(const HeadPlan& plan, std::string run_id, asio::io_context& io, Console& console,
                     Watchdog& watchdog, rdzv::CoordinatorServer& server, const JobHangReporter& hang)
    : plan_(plan),
      io_(io),
      console_(console),
      watchdog_(watchdog),
      server_(server),
      hang_(hang),
      run_id_(std::move(run_id)),
      signals_(io),
      pass_on_(io),
      deadline_(io),
      streams_(io, console, kReadSize),
      reaper_(
          io, [this](int pid, int status) { Reaped(pid, status); }, nullptr) {}

Status HeadNodes::StartNode(const std::string& name, const std::string& launcher, const SpawnSpec& base,
                            const std::string& stdin_data) {
  Result<PipedChild> child = SpawnPiped(base, true);
  if (!child.ok()) return child.status();
  // The token and the -x values may pass the pipe's size, and ssh reads them
  // only once it has connected: written from the loop, and the pipe closes
  // once they are (or the node is gone).
  struct Feed {
    asio::posix::stream_descriptor pipe;
    std::string data;
  };
  auto feed = std::make_shared<Feed>(Feed{asio::posix::stream_descriptor(io_, child->stdin_fd), stdin_data});
  asio::async_write(feed->pipe, asio::buffer(feed->data), [feed](boost::system::error_code, size_t) {});
  watchdog_.Add(child->pid);
  size_t i = nodes_.size();
  Node& node = nodes_.emplace_back();
  node.name = name;
  node.launcher = launcher;
  node.pid = child->pid;
  for (auto [fd, is_err] : {std::pair{child->stdout_fd, false}, std::pair{child->stderr_fd, true}}) {
    // The agents tag their workers' lines; the head only keeps lines whole, so
    // two nodes' output never interleaves mid-line. An agent's tagged line is
    // its cap plus the tag (an argument, so at most 128 KiB): kept whole with
    // room to spare. Untagged (--no-tag), the bytes pass on unchanged.
    StreamRoute r;
    r.console = is_err ? ConsoleStream::kErr : ConsoleStream::kOut;
    r.max_line = 2 * kMaxLineBytes;
    if (is_err) r.tail = node.err_tail.get();
    streams_.Add(fd, static_cast<int>(i), std::move(r), [this, i] { MaybeFinished(i); });
  }
  return Status::Ok();
}

void HeadNodes::WaitSignals() {
  signals_.async_wait([this, alive = life_.token()](boost::system::error_code ec, int sig) {
    if (ec || alive.expired()) return;
    if (stop_signal_ == 0) {
      stop_signal_ = sig;
      // A stalled reader must not hold up the teardown the user asked for.
      console_.NoteStop();
      Stop(128 + sig, fmt::format("stopped by {} on the head", SignalName(sig)));
    } else {
      // A second signal: do not wait for the agents.
      KillAll();
    }
    WaitSignals();
  });
}

// The head runs no worker: a SIGUSR1 or SIGUSR2 (a pre-emption notice) goes to
// every agent, each of which passes it on to its workers, once. The head's
// agents are reached through ssh, pdsh or a local shell, outside any Slurm step
// the head may run in, so the head passes it on whoever sent it.
void HeadNodes::WaitPassOn() {
  pass_on_.async_wait([this, alive = life_.token()](boost::system::error_code ec, int sig) {
    if (ec || alive.expired()) return;
    // Tags of their own: the live view's queries count up from 0.
    server_.Ask(run_id_, kPassOnTagBit | static_cast<std::uint64_t>(sig), PassOnQuery(sig), kPassOnTimeout);
    console_.Say(fmt::format("{}: passed on to every node's workers", SignalName(sig)));
    WaitPassOn();
  });
}

void HeadNodes::Reaped(int pid, int status) {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    if (node.pid != pid) continue;
    watchdog_.Remove(pid);
    node.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    streams_.Drain(static_cast<int>(i));
    MaybeFinished(i);
  }
}

void HeadNodes::MaybeFinished(size_t i) {
  Node& node = nodes_[i];
  if (node.finished || !node.code || streams_.open(static_cast<int>(i)) > 0) return;
  node.finished = true;
  if (!server_.ended() && !stopping_) {
    // The agent is gone and the job has not ended: it never joined, or it died.
    std::vector<std::string> last = node.err_tail->LastLines(1);
    std::string cause = fmt::format("{}: {} exited with code {} before the job ended{}", node.name, node.launcher,
                                    *node.code, last.empty() ? "" : " (" + last.back() + ")");
    Stop(1, cause);
  }
  Complete();
}

void HeadNodes::Stop(int code, const std::string& cause) {
  if (!stopping_) {
    stopping_ = true;
    server_.AbortAll(code, cause);
    // No agent had joined: no coordinator log line says why, so say it here.
    if (!server_.ended()) console_.Say(cause);
  }
  ArmDeadline();
}

// Once the job is over, every agent has --shutdown-timeout (plus slack) to finish.
void HeadNodes::ArmDeadline() {
  if (deadline_armed_) return;
  deadline_armed_ = true;
  WaitDeadline(plan_.shutdown_timeout + kFinishSlack);
}

void HeadNodes::WaitDeadline(Clock::duration after) {
  deadline_.expires_after(after);
  deadline_.async_wait([this, alive = life_.token()](boost::system::error_code ec) {
    if (ec || alive.expired()) return;
    // Agents blocked on their output wait for our reader, not on a hang: no line
    // may be lost to a slow console.
    if (console_.full()) {
      WaitDeadline(kFinishSlack);
      return;
    }
    for (const Node& n : nodes_)
      if (!n.code) console_.Say(fmt::format("{}: the agent did not finish; killing its {}", n.name, n.launcher));
    KillAll();
  });
}

void HeadNodes::KillAll() {
  for (const Node& n : nodes_)
    if (!n.code) kill(-n.pid, SIGKILL);
}

bool HeadNodes::AllFinished() const {
  for (const Node& n : nodes_)
    if (!n.finished) return false;
  return true;
}

void HeadNodes::Run(std::function<void(int)> done) {
  done_ = std::move(done);
  reaper_.Start();
  for (int sig : plan_.stop_signals) signals_.add(sig);
  WaitSignals();
  for (int sig : {SIGUSR1, SIGUSR2})
    if (std::find(plan_.stop_signals.begin(), plan_.stop_signals.end(), sig) == plan_.stop_signals.end())
      pass_on_.add(sig);
  WaitPassOn();
  reaper_.ReapNow();  // a node that failed before the reaper was in place
  // Once the coordinator has ended the job, the agents' time to finish starts.
  server_.OnJobEnded([this, alive = life_.token()](const rdzv::JobEnded&) {
    if (!alive.expired()) ArmDeadline();
  });
  Complete();  // no node could be started
}

void HeadNodes::Complete() {
  if (completed_ || !AllFinished()) return;
  completed_ = true;
  boost::system::error_code ignored;
  signals_.cancel(ignored);
  pass_on_.cancel(ignored);
  reaper_.Stop();
  deadline_.cancel();
  streams_.CloseAll();
  int code = 1;
  if (stop_signal_ != 0) {
    code = 128 + stop_signal_;
  } else if (const auto& ended = server_.ended()) {
    if (ended->exit_code != 0) {
      // A job stopped on a hang shows its summary under the cause, as a single node does.
      std::vector<std::string> lines = hang_.StopLines(ended->summary);
      if (lines.empty()) lines.push_back(fmt::format("job: {}", ended->summary));
      for (const std::string& line : lines) console_.Say(line);
    }
    code = ended->exit_code;
  }
  // The cancelled handlers above are queued already; `done` runs after them.
  asio::post(io_, [done = std::move(done_), code] { done(code); });
}

}  // namespace dlaunch::launcher
