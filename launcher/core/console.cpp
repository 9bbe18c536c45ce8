#include "launcher/core/console.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <fmt/format.h>

#include "launcher/core/event_loop.hpp"
#include "launcher/core/output.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

namespace asio = boost::asio;

struct Console::Sink {
  enum class Kind {
    kGone,         // closed, or its reader is gone: output is discarded
    kBlocking,     // plain writes on the inherited fd (a regular file)
    kNonBlocking,  // write() on our own O_NONBLOCK description
    kSocket,       // send(MSG_DONTWAIT) on our own dup
  };
  Kind kind = Kind::kGone;
  int fd = -1;
  bool splice = false;    // a pipe or a regular file: splice(2) may write it
  bool may_grow = false;  // a pipe not yet offered to the budget: grown once busy
  BusyMeter meter;
  bool line_open = false;  // what was last given to it ends no line (untagged output, LineTagger)
  std::unique_ptr<asio::posix::stream_descriptor> waiter;  // owns fd for the last two kinds
  std::string queue;
  size_t head = 0;  // queue[head..] is still to be written
  bool waiting = false;
  // Spliced bytes the reader has not taken yet: still in the pipe `owed_from`.
  int owed_from = -1;
  size_t owed = 0;
  std::function<void(size_t)> owed_then;
  std::vector<std::function<void()>> idle_waiters;  // WhenIdle
  size_t pending() const { return queue.size() - head + owed; }
};

namespace {

using Sink = Console::Sink;

std::unique_ptr<Sink> OpenSink(asio::io_context& io, int fd) {
  auto s = std::make_unique<Sink>();
  struct stat st {};
  if (fstat(fd, &st) != 0) return s;  // closed: nowhere to show output
  s->kind = Sink::Kind::kBlocking;
  s->fd = fd;
  s->splice = S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode);
  int own = -1;
  Sink::Kind kind = Sink::Kind::kBlocking;
  if (S_ISSOCK(st.st_mode)) {
    // MSG_DONTWAIT makes each send non-blocking without touching the shared flags.
    own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    kind = Sink::Kind::kSocket;
  } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
    // O_NONBLOCK belongs to the open file description, which the user's shell
    // shares; a fresh open of the same pipe or tty gets a description of our own.
    own = open(fmt::format("/proc/self/fd/{}", fd).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (own < 0 && errno == ENXIO) {
      s->kind = Sink::Kind::kGone;  // a FIFO whose reader is gone
      return s;
    }
    kind = Sink::Kind::kNonBlocking;
    s->may_grow = S_ISFIFO(st.st_mode);
  }
  if (own < 0) return s;  // a regular file, or no way to reopen: plain writes
  try {
    s->waiter = std::make_unique<asio::posix::stream_descriptor>(io, own);
  } catch (const boost::system::system_error&) {
    close(own);
    return s;
  }
  s->kind = kind;
  s->fd = own;
  return s;
}

// One non-blocking write of a socket or pipe sink: send's or write's result.
ssize_t WriteSome(const Sink& s, const char* p, size_t n) {
  return s.kind == Sink::Kind::kSocket ? send(s.fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL) : write(s.fd, p, n);
}

bool SameObject(int a, int b) {
  struct stat sa {
  }, sb{};
  return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

Console::Console(asio::io_context& io, int out_fd, int err_fd, size_t cap, PipeBudget* pipes)
    : io_(io), cap_(cap), pipes_(pipes) {
  if (pipes_ == nullptr) {
    own_pipes_ = std::make_unique<PipeBudget>(SystemPipeSizes());
    pipes_ = own_pipes_.get();
  }
  sinks_.push_back(OpenSink(io, out_fd));
  if (!SameObject(out_fd, err_fd)) sinks_.push_back(OpenSink(io, err_fd));
}

Console::~Console() = default;

Console::Sink& Console::SinkFor(ConsoleStream stream) {
  return stream == ConsoleStream::kErr ? *sinks_.back() : *sinks_.front();
}

const Console::Sink& Console::SinkFor(ConsoleStream stream) const {
  return stream == ConsoleStream::kErr ? *sinks_.back() : *sinks_.front();
}

bool Console::Splices(ConsoleStream stream) const {
  const Sink& s = SinkFor(stream);
  return !stopped_ && s.splice && s.kind != Sink::Kind::kGone;
}

bool Console::CanSplice(ConsoleStream stream) const {
  const Sink& s = SinkFor(stream);
  return Splices(stream) && s.pending() == 0 && !s.waiting;
}

void Console::Splice(ConsoleStream stream, int from, size_t n, std::function<void(size_t)> then) {
  Sink& s = SinkFor(stream);
  s.line_open = false;  // whole lines
  s.owed_from = from;
  s.owed = n;
  s.owed_then = std::move(then);
  if (MoveOwed(s)) Flush(s);
}

// Moves what is owed until the reader stops taking it. True when nothing is
// owed any more (moved, or the reader is gone); false when it waits for the reader.
bool Console::MoveOwed(Sink& s) {
  while (s.owed > 0 && s.kind != Sink::Kind::kGone) {
    ssize_t n = splice(s.owed_from, nullptr, s.fd, nullptr, s.owed, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    if (n > 0) {
      s.owed -= static_cast<size_t>(n);
      Moved(s, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN && s.kind != Sink::Kind::kBlocking) {
      // The reader is slow (EAGAIN from a full pipe; `from` always holds what is owed).
      Arm(s);
      return false;
    } else {
      s.kind = Sink::Kind::kGone;  // EPIPE and the like
    }
  }
  size_t left = s.owed;
  s.owed = 0;
  s.owed_from = -1;
  if (s.owed_then) asio::post(io_, [then = std::move(s.owed_then), left] { then(left); });
  s.owed_then = nullptr;
  if (left > 0) Gone(s);
  return true;
}

void Console::WhenIdle(ConsoleStream stream, std::function<void()> ready) {
  Sink& s = SinkFor(stream);
  if (s.pending() == 0 || s.kind == Sink::Kind::kGone || stopped_) {
    asio::post(io_, std::move(ready));
    return;
  }
  s.idle_waiters.push_back(std::move(ready));
}

void Console::EndSplice(int from) {
  for (auto& sink : sinks_)
    if (sink->owed_from == from && sink->owed > 0) TakeOwed(*sink, false);
}

// Reads what is owed into the queue, ahead of everything waiting there (it
// came first), and lets its stream go on when `notify`.
void Console::TakeOwed(Sink& s, bool notify) {
  std::string owed(s.owed, '\0');
  owed.resize(ReadPresent(s.owed_from, owed.data(), owed.size()));
  s.owed = 0;
  s.owed_from = -1;
  if (notify && s.owed_then) asio::post(io_, [then = std::move(s.owed_then)] { then(0); });
  s.owed_then = nullptr;
  s.queue.insert(s.head, owed);
  if (!s.waiting) Flush(s);
}

size_t Console::buffered() const {
  size_t n = 0;
  for (const auto& s : sinks_) n += s->pending();
  return n;
}

bool Console::full() const { return !stopped_ && buffered() >= cap_; }

void Console::Write(ConsoleStream stream, std::string_view data) {
  if (data.empty() || (stopped_ && buffered() + data.size() > cap_)) return;
  Sink& s = SinkFor(stream);
  s.line_open = data.back() != '\n';
  Enqueue(s, data);
}

void Console::Say(std::string_view message) {
  // dlaunch's own lines quote text from outside (peers' failure reasons and host
  // names, a worker's last stderr lines): escaped, so that no byte of it drives
  // the terminal or starts a line of its own. A tab is harmless and kept.
  std::string safe = SafeUtf8(message, true);
  std::replace(safe.begin(), safe.end(), '\n', '?');
  // After an untagged worker's line that has no newline (yet), on a line of its own.
  Sink& s = SinkFor(ConsoleStream::kErr);
  Enqueue(s, fmt::format("{}dlaunch: {}\n", s.line_open ? "\n" : "", safe));
  s.line_open = false;
}

void Console::Enqueue(Sink& s, std::string_view data) {
  if (data.empty() || s.kind == Sink::Kind::kGone) return;
  if (s.kind == Sink::Kind::kBlocking) {
    WriteAll(s.fd, data);
    return;
  }
  if (s.pending() == 0 && !s.waiting) {
    // Nothing queued ahead: write from the caller's buffer, and copy into the
    // queue only what the reader does not take now (the worker's tagged lines
    // were copied once already; perf showed the queue's copy at about 7% of
    // dlaunch's time under 8 ranks of cat).
    while (!data.empty()) {
      ssize_t n = WriteSome(s, data.data(), data.size());
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
        Moved(s, static_cast<size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      } else {
        return Gone(s);
      }
    }
    if (data.empty()) return;
    s.queue.append(data);
    return Arm(s);
  }
  s.queue.append(data);
  if (!s.waiting) Flush(s);
}

void Console::Flush(Sink& s) {
  if (s.owed > 0 && !MoveOwed(s)) return;
  while (s.kind != Sink::Kind::kGone && s.pending() > 0) {
    ssize_t n = WriteSome(s, s.queue.data() + s.head, s.pending());
    if (n > 0) {
      s.head += static_cast<size_t>(n);
      Moved(s, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      Arm(s);
      break;
    } else {
      // EPIPE and the like: the reader is gone, so the output has nowhere to go.
      s.kind = Sink::Kind::kGone;
      s.queue.clear();
      s.head = 0;
    }
  }
  if (s.pending() == 0) {
    s.queue.clear();
    s.head = 0;
  } else if (s.head > s.queue.size() / 2) {
    s.queue.erase(0, s.head);
    s.head = 0;
  }
  Release();
}

// A pipe sink that moves output fast is grown (within the job's budget): the
// reader and dlaunch then take turns every 1 MiB instead of every 64 KiB. Only
// the pipe's capacity changes: back-pressure comes 1 MiB later, and what the
// console holds is bounded as before. A refusal by Linux is said once, from a
// handler of its own (this runs inside a write to the sink Say would use).
void Console::Moved(Sink& s, size_t n) {
  if (!s.may_grow || !s.meter.Moved(n, std::chrono::steady_clock::now())) return;
  s.may_grow = false;
  pipes_->Grow(s.fd);
  if (std::optional<std::string> refusal = pipes_->TakeRefusal())
    asio::post(io_, [this, alive = life_.token(), line = std::move(*refusal)] {
      if (!alive.expired()) Say(line);
    });
}

void Console::Gone(Sink& s) {
  s.kind = Sink::Kind::kGone;
  s.queue.clear();
  s.head = 0;
  if (s.owed > 0) MoveOwed(s);  // tells the stream the reader is gone
  Release();
}

void Console::Arm(Sink& s) {
  s.waiting = true;
  s.waiter->async_wait(asio::posix::descriptor_base::wait_write, [this, &s](boost::system::error_code ec) {
    // Aborted: the console is being destroyed and `s` may be gone.
    if (ec == asio::error::operation_aborted) return;
    s.waiting = false;
    if (ec) return Gone(s);
    Flush(s);
  });
}

void Console::Release() {
  for (auto& sink : sinks_) {
    if (sink->idle_waiters.empty() || (sink->pending() > 0 && sink->kind != Sink::Kind::kGone && !stopped_)) continue;
    std::vector<std::function<void()>> idle;
    idle.swap(sink->idle_waiters);
    for (auto& f : idle) asio::post(io_, std::move(f));
  }
  // Half the cap: a paused reader resumes with room for more than one read.
  if (waiters_.empty() || (!stopped_ && buffered() > cap_ / 2)) return;
  std::vector<std::function<void()>> ready;
  ready.swap(waiters_);
  for (auto& f : ready) asio::post(io_, std::move(f));
}

void Console::WhenRoom(std::function<void()> resume) {
  if (!full()) {
    asio::post(io_, std::move(resume));
    return;
  }
  waiters_.push_back(std::move(resume));
}

void Console::NoteStop() {
  if (stopped_) return;
  stopped_ = true;
  stop_at_ = std::chrono::steady_clock::now();
  // A stalled reader must not hold a stream that waits for spliced bytes to be
  // taken: they move into the queue (one read's worth a sink, at most) and the
  // stream goes on, dropping what does not fit from now on.
  for (auto& sink : sinks_)
    if (sink->owed > 0) TakeOwed(*sink, true);
  Release();
}

bool Console::Drain(const std::vector<int>& stop_signals) {
  if (buffered() == 0) return true;
  asio::signal_set signals(io_);
  boost::system::error_code ignored;
  for (int sig : stop_signals) signals.add(sig, ignored);
  asio::steady_timer grace(io_);
  bool expired = false;
  auto arm_grace = [&] {
    grace.expires_at(stop_at_ + kStopGrace);
    grace.async_wait([&](boost::system::error_code ec) { expired = expired || !ec; });
  };
  signals.async_wait([&](boost::system::error_code ec, int) {
    if (ec) return;
    NoteStop();
    arm_grace();
  });
  if (stopped_) arm_grace();
  RunWhile(io_, [&] { return buffered() > 0 && !expired; });
  // Let the cancelled handlers, which point at this frame, run before it goes.
  signals.cancel(ignored);
  grace.cancel();
  RunReady(io_);
  return buffered() == 0;
}

}  // namespace dlaunch::launcher
