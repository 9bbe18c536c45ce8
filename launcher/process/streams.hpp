// Child output and child exits: the one path the runner (workers) and the head
// (agents) share.
//
// Streams reads child pipes on the io_context, keeps lines whole (LineTagger),
// and sends them to the Console, a log file and a tail buffer. A stream with
// no tag and no log file moves its whole lines to the console with splice(2)
// instead, when the console's object takes it (Console::CanSplice): dlaunch
// then copies only the last few KiB of each chunk (for the tail and `dlaunch
// status`'s last line), and a partial line waits in the pipe for its end, as
// it would wait in the tagger. A stream that
// shows on the console stops reading while the console is full, so its writer
// blocks on the pipe, and reads again once the console drains. A pipe keeps
// Linux's default size until its stream is busy, and is then grown within the
// job's budget (Console::pipes, PipeBudget). Reaper reaps every exited child on
// SIGCHLD. Every call happens on the io_context's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/core/console.hpp"
#include "launcher/core/event_loop.hpp"
#include "launcher/core/output.hpp"

namespace dlaunch::launcher {

// Default: how long output may keep draining after its writer exited (time
// spent paused on a full console does not count).
inline constexpr std::chrono::seconds kDrainTimeout{2};

// Where one pipe's bytes go.
struct StreamRoute {
  std::optional<ConsoleStream> console;  // nullopt: not shown
  std::string prefix;                    // before each console line
  std::string format;                    // non-empty: re-render `prefix` from it at each read ({time})
  TagFields fields;                      // for `format`
  // The longest line kept whole (LineTagger's cap). Default: kMaxLineBytes.
  size_t max_line = kMaxLineBytes;
  int file_fd = -1;            // owned: gets the raw bytes; closed with the stream
  TailBuffer* tail = nullptr;  // gets the raw bytes; must outlive the stream
  LastLine* last = nullptr;    // gets the raw bytes (dlaunch status); must outlive the stream
  // Set to the time of each read that brought bytes (the hang watch); must outlive the stream.
  std::chrono::steady_clock::time_point* progress = nullptr;
};

class Streams {
 public:
  // `read_size`: bytes per read of one pipe. `now`: the time new bytes are
  // stamped with (StreamRoute::progress and last), the runner's clock.
  Streams(boost::asio::io_context& io, Console& console, size_t read_size,
          std::function<std::chrono::steady_clock::time_point()> now = std::chrono::steady_clock::now);
  ~Streams();
  Streams(const Streams&) = delete;
  Streams& operator=(const Streams&) = delete;

  // Takes `fd` (the read end of a child's pipe) and reads it to its end.
  // `on_close` runs once when it closes by end of file, a read error or Drain's
  // timeout (not by CloseAll).
  void Add(int fd, int group, StreamRoute route, std::function<void()> on_close);
  // Streams of `group` still open.
  int open(int group) const;
  // True while an open stream of `group` (of those feeding `last`, when given)
  // waits for room on the console with bytes still unread in its pipe: its
  // writer made progress that dlaunch holds back, and may be blocked writing to
  // the full pipe. Such time is not silence (the hang watch). A paused stream
  // whose pipe is empty is not held: its writer wrote nothing since.
  bool held(int group, const LastLine* last = nullptr) const;
  // The writers of `group` have exited: close what is still open after
  // kDrainTimeout of reading (a grandchild may hold a pipe open). Idempotent.
  void Drain(int group);
  // Closes every stream now, passing on unfinished lines (LineTagger::Finish);
  // no on_close runs.
  void CloseAll();
  // Bytes moved by splice, not copied through dlaunch (tests, benchmarks).
  uint64_t spliced() const { return spliced_; }

 private:
  struct Stream;
  void Read(Stream* s);
  void Continue(Stream* s);
  void Wait(Stream* s);
  void Round(Stream* s);
  bool WaitForQueue(Stream* s);
  void FinishPartial(Stream* s, std::string_view seen);
  void Deliver(Stream* s, std::string_view data);
  bool OpenScratch();
  void ClearScratch();
  bool AllSplice() const;
  void Close(Stream* s);
  void Moved(Stream* s, size_t n);
  void ArmDrain(int group);

  boost::asio::io_context& io_;
  Console& console_;
  std::function<std::chrono::steady_clock::time_point()> now_;
  size_t read_size_;
  std::list<std::unique_ptr<Stream>> streams_;
  std::map<int, std::unique_ptr<boost::asio::steady_timer>> drains_;
  std::string out_;            // scratch for tagged output
  int scratch_[2] = {-1, -1};  // a pipe that tee(2) fills, to see what a spliced chunk holds
  int null_ = -1;              // /dev/null, where splice(2) discards what was seen
  uint64_t spliced_ = 0;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // for callbacks that may outlive this
};

// Reaps every exited child (workers, and orphans reparented to this subreaper).
class Reaper {
 public:
  // `on_exit(pid, wait_status)` for each child reaped, then `after()` once per batch.
  Reaper(boost::asio::io_context& io, std::function<void(int pid, int status)> on_exit, std::function<void()> after);
  // Reaps at each SIGCHLD from now on.
  void Start();
  void Stop();
  // Reaps what has exited already (a child that exited before Start).
  void ReapNow();
  // How many children every Reaper of this process has reaped so far. While it
  // stays the same, a pid that stays among this process's children names the
  // same process: a child's pid is not freed until it is reaped (Adopted's scans
  // read a child's /proc stat only when it may have changed).
  static uint64_t reaped();

 private:
  void Wait();

  boost::asio::signal_set sigchld_;
  std::function<void(int, int)> on_exit_;
  std::function<void()> after_;
  bool stopped_ = false;
  Lifetime life_;  // last: expires first
};

}  // namespace dlaunch::launcher
