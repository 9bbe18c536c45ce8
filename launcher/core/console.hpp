// The console: dlaunch's stdout and stderr, written without ever blocking the
// event loop that carries heartbeats and signals.
//
// One Console per process owns both. Writes go through a bounded buffer and
// non-blocking writes on a file description of its own (a reopened
// /proc/self/fd/N for a pipe, FIFO or tty, a socket with MSG_DONTWAIT), so the
// inherited description the user's shell shares is never switched to
// O_NONBLOCK. When stdout and stderr are the same object, one queue keeps their
// order. Workers' output is always accepted, but whoever reads it must stop
// while the console is full() and resume on WhenRoom(), so the workers block on
// their pipes as under a plain terminal and nothing is dropped or grows without
// bound. Every call happens on the io_context's thread. The process must ignore
// SIGPIPE (main does), so a reader that is gone reads as EPIPE.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/core/event_loop.hpp"
#include "launcher/core/pipe_budget.hpp"

namespace dlaunch::launcher {

// Default: 4 MiB of output held for a slow reader before workers are paused.
inline constexpr size_t kConsoleCap = size_t{4} << 20;
// Default: after a stop signal, how long the end of the job waits for a stalled reader.
inline constexpr std::chrono::milliseconds kStopGrace{500};

enum class ConsoleStream { kOut, kErr };

class Console {
 public:
  // Takes over writing to `out_fd` and `err_fd` (normally 1 and 2); they stay
  // open and keep their flags. A regular file is written with plain writes (it
  // never waits for a reader); so is a pipe or tty that cannot be reopened.
  // `pipes`: the job's pipe budget (must outlive the console); null: one of its
  // own on the kernel's pipes. A pipe it writes to is grown once busy (PipeBudget).
  Console(boost::asio::io_context& io, int out_fd, int err_fd, size_t cap = kConsoleCap, PipeBudget* pipes = nullptr);
  ~Console();
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;

  // Queues a worker's (whole-line) output. Always accepted; never blocks. After
  // NoteStop(), what does not fit under the cap is dropped instead.
  void Write(ConsoleStream stream, std::string_view data);
  // dlaunch's own line on stderr, "dlaunch: MESSAGE\n": never dropped, never blocks.
  // It starts a line: after a worker's untagged output that ended without a
  // newline, a newline comes first.
  // MESSAGE is written as SafeUtf8 (text.hpp) makes it: a control character but
  // tab, or a byte of invalid UTF-8 (a peer's escape sequence, a newline), shows as '?'.
  void Say(std::string_view message);

  // True while more than the cap waits for the reader: stop reading workers.
  bool full() const;
  // Bytes waiting in this process for the readers.
  size_t buffered() const;
  // Calls `resume` (posted to the io_context) once the console has drained to
  // half its cap, or at once when it is not full.
  void WhenRoom(std::function<void()> resume);

  // Splicing: a worker's untagged lines moved from its pipe to the console's
  // object by splice(2), without being copied through dlaunch (Streams does it
  // for streams with no tag and no log file). True when `stream`'s object takes
  // spliced bytes (a pipe or a regular file; a tty or a socket does not) and
  // nothing is queued or owed for it, so that spliced bytes keep their place.
  bool CanSplice(ConsoleStream stream) const;
  // The same but for the queue: the object takes spliced bytes, its reader is
  // there, and no stop signal came (after one, output past the cap is dropped,
  // which the copying path does).
  bool Splices(ConsoleStream stream) const;
  // Moves the first `n` bytes of the pipe `from` (whole lines) to `stream`'s
  // object; call only when CanSplice. What the reader does not take at once
  // stays in `from` and is owed: nothing else is written to that object until
  // it has been moved (other lines wait in the queue behind it), and it counts
  // as buffered. `then(0)` is posted once all `n` are moved; `then(left)` when
  // the object's reader is gone with `left` bytes still in `from` (discard them).
  void Splice(ConsoleStream stream, int from, size_t n, std::function<void(size_t left)> then);
  // Posts `ready` once nothing is queued or owed for `stream`'s object (at
  // once when that holds now), or its reader is gone: a stream that would
  // splice waits for it rather than copy behind a queue.
  void WhenIdle(ConsoleStream stream, std::function<void()> ready);
  // `from` is about to be closed: what is still owed from it is read into the
  // queue ahead of everything waiting there, so that nothing is lost and the
  // order holds; its `then` does not run. NoteStop does the same for every
  // owed splice, and runs their `then`.
  void EndSplice(int from);

  // A stop signal arrived: the console no longer holds workers back (output that
  // does not fit is dropped) and Drain waits at most kStopGrace from now.
  void NoteStop();
  bool stopped() const { return stopped_; }

  // Runs the io_context until everything queued is written or every reader is
  // gone; a stop signal (one of `stop_signals`, or NoteStop before) limits the
  // wait to kStopGrace. Returns true when nothing was left unwritten.
  bool Drain(const std::vector<int>& stop_signals);

  // The job's pipe budget, which the streams that feed the console share.
  PipeBudget& pipes() { return *pipes_; }

  struct Sink;  // one output object; defined in console.cpp

 private:
  void Enqueue(Sink& sink, std::string_view data);
  void Gone(Sink& sink);
  void Flush(Sink& sink);
  void Arm(Sink& sink);
  void Release();
  void Moved(Sink& sink, size_t n);
  bool MoveOwed(Sink& sink);
  void TakeOwed(Sink& sink, bool notify);
  Sink& SinkFor(ConsoleStream stream);
  const Sink& SinkFor(ConsoleStream stream) const;

  boost::asio::io_context& io_;
  size_t cap_;
  std::vector<std::unique_ptr<Sink>> sinks_;  // one, or stdout's then stderr's
  std::vector<std::function<void()>> waiters_;
  bool stopped_ = false;
  std::chrono::steady_clock::time_point stop_at_;
  std::unique_ptr<PipeBudget> own_pipes_;  // when none was given
  PipeBudget* pipes_;
  Lifetime life_;  // last: expires first
};

}  // namespace dlaunch::launcher
