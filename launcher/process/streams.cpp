#include "launcher/process/streams.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

namespace dlaunch::launcher {

namespace asio = boost::asio;

namespace {

// Of each spliced chunk, the last bytes dlaunch reads for the failure tail
// (TailBuffer, 4 KiB) and `dlaunch status`'s last line (LastLine, 2 x 512 B).
constexpr size_t kSeenBytes = 8192;

// splice(2) pays four calls a chunk (tee, two splices, a read of the last
// bytes) where a copy pays two: it wins only on large chunks, so a stream
// splices while its reads come back full and copies again once they are short.
bool Spliceable(const StreamRoute& r, size_t read_size) {
  return r.console && r.prefix.empty() && r.format.empty() && r.file_fd < 0 && read_size >= 8 * kSeenBytes;
}

// Moves `n` bytes that are known to be in the pipe `from` to `to`.
bool SpliceAll(int from, int to, size_t n) {
  while (n > 0) {
    ssize_t m = splice(from, nullptr, to, nullptr, n, SPLICE_F_MOVE);
    if (m > 0) {
      n -= static_cast<size_t>(m);
    } else if (!(m < 0 && errno == EINTR)) {
      return false;
    }
  }
  return true;
}

// Reads `n` bytes that are known to be in the pipe `fd`.
bool ReadAll(int fd, char* p, size_t n) { return ReadPresent(fd, p, n) == n; }

bool HungUp(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLHUP) != 0;
}

}  // namespace

struct Streams::Stream {
  // The buffer is left uninitialised: zeroing 256 KiB per pipe was a third of
  // a short job's start-up CPU, and a read touches only the pages it fills.
  Stream(asio::io_context& io, int fd, size_t size)
      : sd(io, fd), fd(fd), buf(std::make_unique_for_overwrite<char[]>(size)), size(size) {}
  asio::posix::stream_descriptor sd;
  int fd;  // sd's, for FIONREAD (held) and splice
  int group = 0;
  StreamRoute route;
  LineTagger tagger;
  std::function<void()> on_close;
  bool open = true;
  bool paused = false;  // waiting for room on the console, or for it to take spliced lines
  bool spliceable = false;
  bool bulk = false;     // the last read filled the buffer: splice next
  bool may_grow = true;  // not yet offered to the pipe budget
  BusyMeter meter;
  // Bytes at the head of the pipe already given to the tail, the last line and
  // the hang watch (a partial line that waits in the pipe for its end).
  size_t seen_ahead = 0;
  std::unique_ptr<char[]> buf;
  size_t size;
};

Streams::Streams(asio::io_context& io, Console& console, size_t read_size,
                 std::function<std::chrono::steady_clock::time_point()> now)
    : io_(io), console_(console), now_(std::move(now)), read_size_(read_size) {}

// Handlers still queued on the io_context check `alive_` and do nothing.
Streams::~Streams() {
  CloseAll();
  for (int fd : {scratch_[0], scratch_[1], null_})
    if (fd >= 0) close(fd);
}

bool Streams::OpenScratch() {
  if (scratch_[0] >= 0) return true;
  if (null_ == -2) return false;  // tried, and failed: copy
  if (pipe2(scratch_, O_CLOEXEC | O_NONBLOCK) == 0) {
    fcntl(scratch_[0], F_SETPIPE_SZ, static_cast<int>(read_size_));
    null_ = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  }
  if (scratch_[0] >= 0 && null_ >= 0) return true;
  for (int* fd : {&scratch_[0], &scratch_[1], &null_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
  null_ = -2;
  return false;
}

// True when every open stream shown on the console splices.
bool Streams::AllSplice() const {
  for (const auto& each : streams_)
    if (each->open && each->route.console && !each->spliceable) return false;
  return true;
}

// Empties the scratch pipe, which every spliceable stream's next tee expects empty.
void Streams::ClearScratch() {
  char sink[4096];
  while (read(scratch_[0], sink, sizeof sink) > 0) {
  }
}

void Streams::Add(int fd, int group, StreamRoute route, std::function<void()> on_close) {
  auto s = std::make_unique<Stream>(io_, fd, read_size_);
  s->group = group;
  s->route = std::move(route);
  s->on_close = std::move(on_close);
  s->tagger = LineTagger(s->route.max_line);
  s->spliceable = Spliceable(s->route, read_size_) && OpenScratch();
  Stream* raw = s.get();
  streams_.push_back(std::move(s));
  Read(raw);
}

// What the tail, the last line and the hang watch see of new bytes; the first
// seen_ahead of them were seen already.
void Streams::Deliver(Stream* s, std::string_view data) {
  size_t skip = std::min(s->seen_ahead, data.size());
  s->seen_ahead -= skip;
  data.remove_prefix(skip);
  if (data.empty()) return;
  StreamRoute& r = s->route;
  auto now = now_();
  if (r.progress != nullptr) *r.progress = now;
  if (r.last != nullptr) r.last->Append(data, now);
  if (r.tail != nullptr) r.tail->Append(data);
}

// Offers a busy stream's pipe to the job's budget, once.
void Streams::Moved(Stream* s, size_t n) {
  if (!s->may_grow || !s->meter.Moved(n, std::chrono::steady_clock::now())) return;
  s->may_grow = false;
  console_.pipes().Grow(s->fd);
  if (std::optional<std::string> refusal = console_.pipes().TakeRefusal()) console_.Say(*refusal);
}

void Streams::Continue(Stream* s) {
  if (s->route.console && console_.full()) {
    // Back-pressure: the writer blocks on its full pipe, as under a slow terminal.
    s->paused = true;
    console_.WhenRoom([this, s, alive = std::weak_ptr<int>(alive_)] {
      if (alive.expired() || !s->open) return;
      s->paused = false;
      Continue(s);
    });
    return;
  }
  if (s->spliceable && s->bulk) return Round(s);
  Read(s);
}

void Streams::Read(Stream* s) {
  std::weak_ptr<int> alive = alive_;
  s->sd.async_read_some(asio::buffer(s->buf.get(), s->size), [this, s, alive](boost::system::error_code ec, size_t n) {
    if (alive.expired() || !s->open) return;
    StreamRoute& r = s->route;
    if (n > 0) {
      std::string_view data(s->buf.get(), n);
      if (r.console) {
        if (!r.format.empty()) r.prefix = RenderTag(r.format, r.fields, std::time(nullptr)).value();
        out_.clear();
        s->tagger.Feed(data, r.prefix, out_);
        console_.Write(*r.console, out_);
      }
      if (r.file_fd >= 0) WriteAll(r.file_fd, data);
      Deliver(s, data);
      s->bulk = n == s->size;
      Moved(s, n);
    }
    if (ec) {
      Close(s);
      if (s->on_close) s->on_close();
      return;
    }
    Continue(s);
  });
}

void Streams::Wait(Stream* s) {
  std::weak_ptr<int> alive = alive_;
  s->sd.async_wait(asio::posix::descriptor_base::wait_read, [this, s, alive](boost::system::error_code ec) {
    if (alive.expired() || !s->open) return;
    if (ec) {
      Close(s);
      if (s->on_close) s->on_close();
      return;
    }
    Round(s);
  });
}

// Lines queued or owed ahead (another stream's splice, a short chunk's,
// dlaunch's own): splice once they are out rather than copy behind them. Only
// when every stream on the console splices: a copying one could keep the queue
// from ever emptying. Asked before tee, so that the streams woken together, of
// which one wins, pay no call for it. True when `s` now waits for the queue.
bool Streams::WaitForQueue(Stream* s) {
  StreamRoute& r = s->route;
  if (s->tagger.has_partial() || !console_.Splices(*r.console) || console_.CanSplice(*r.console) || console_.full() ||
      !AllSplice())
    return false;
  s->paused = true;
  console_.WhenIdle(*r.console, [this, s, alive = std::weak_ptr<int>(alive_)] {
    if (alive.expired() || !s->open) return;
    s->paused = false;
    Continue(s);
  });
  return true;
}

// Finishes the tagger's partial line through it (the bytes up to its end are
// read for real, `seen` shows them), so that the next round splices from a
// line start.
void Streams::FinishPartial(Stream* s, std::string_view seen) {
  StreamRoute& r = s->route;
  size_t end = seen.find('\n');
  if (end == std::string_view::npos || !ReadAll(s->fd, s->buf.get(), end + 1)) {
    s->bulk = false;
    return Read(s);
  }
  std::string_view head(s->buf.get(), end + 1);
  out_.clear();
  s->tagger.Feed(head, r.prefix, out_);
  console_.Write(*r.console, out_);
  Deliver(s, head);
  Moved(s, head.size());
  Continue(s);
}

// One chunk of a spliceable stream. tee(2) shows what the pipe holds without
// taking it; the whole lines at its head then go to the console by splice (a
// large chunk) or through the queue (a short one, which also ends the bulk),
// and a partial line stays in the pipe until its end comes, as it would stay
// in the tagger. What cannot be handled so (a line longer than what is seen, a
// partial line whose writer is gone) goes to Read; a partial line the tagger
// holds the start of is finished through it first.
void Streams::Round(Stream* s) {
  StreamRoute& r = s->route;
  if (WaitForQueue(s)) return;
  ssize_t got;
  do got = tee(s->fd, scratch_[1], s->size, SPLICE_F_NONBLOCK);
  while (got < 0 && errno == EINTR);
  if (got < 0 && errno == EAGAIN) return Wait(s);
  if (got <= 0) {
    // End of file (or tee refused this pipe): Read sees it and closes.
    s->bulk = false;
    return Read(s);
  }
  size_t len = static_cast<size_t>(got);
  bool partial = s->tagger.has_partial();
  bool big = !partial && len > kSeenBytes && console_.CanSplice(*r.console);
  // What is read of the scratch pipe: the last kSeenBytes of a large chunk,
  // the head of one that ends the tagger's partial line, or all of a short one.
  size_t base = big ? len - kSeenBytes : 0;
  size_t seen = partial ? std::min(len, kSeenBytes) : len - base;
  size_t after = len - base - seen;
  if ((base > 0 && !SpliceAll(scratch_[0], null_, base)) || !ReadAll(scratch_[0], s->buf.get(), seen) ||
      (after > 0 && !SpliceAll(scratch_[0], null_, after))) {
    // Not expected (the bytes were there a moment ago): this stream copies from now on.
    ClearScratch();
    s->spliceable = false;
    s->bulk = false;
    return Read(s);
  }
  std::string_view view(s->buf.get(), seen);
  if (partial) return FinishPartial(s, view);
  size_t nl = view.rfind('\n');
  if (nl == std::string_view::npos) {
    if (base > 0 || len == s->size || HungUp(s->fd)) {
      s->bulk = false;
      return Read(s);
    }
    // A partial line: it waits in the pipe (Deliver skips what was seen of it).
    Deliver(s, view);
    s->seen_ahead = len;
    return Wait(s);
  }
  size_t lines = base + nl + 1;  // the whole lines at the pipe's head
  Moved(s, lines);
  s->seen_ahead = s->seen_ahead > base ? s->seen_ahead - base : 0;
  Deliver(s, view);
  s->seen_ahead = len - lines;
  if (!big) {
    console_.Write(*r.console, view.substr(0, nl + 1));
    s->bulk = false;
    if (!SpliceAll(s->fd, null_, lines)) {
      s->spliceable = false;
      return Read(s);
    }
    return Continue(s);
  }
  spliced_ += lines;
  s->paused = true;  // held(): the pipe keeps what the console owes
  console_.Splice(*r.console, s->fd, lines, [this, s, alive = std::weak_ptr<int>(alive_)](size_t left) {
    if (alive.expired() || !s->open) return;
    s->paused = false;
    // The reader is gone: what was not moved is dropped, as a write to it would be.
    if (left > 0 && !SpliceAll(s->fd, null_, left)) s->spliceable = false;
    // Not Wait: what the writer wrote while the console owed woke nobody.
    Continue(s);
  });
}

void Streams::Close(Stream* s) {
  if (!s->open) return;
  s->open = false;
  if (s->route.console) {
    out_.clear();
    if (s->spliceable) {
      // What the console still owes, then the partial line that waits in the
      // pipe: both read now, so that the line is finished and nothing is lost.
      console_.EndSplice(s->fd);
      if (s->seen_ahead > 0 && s->seen_ahead <= s->size && ReadAll(s->fd, s->buf.get(), s->seen_ahead))
        s->tagger.Feed(std::string_view(s->buf.get(), s->seen_ahead), s->route.prefix, out_);
    }
    s->tagger.Finish(s->route.prefix, out_);
    console_.Write(*s->route.console, out_);
  }
  if (s->route.file_fd >= 0) close(s->route.file_fd);
  console_.pipes().Closed(s->fd);
  boost::system::error_code ignored;
  s->sd.close(ignored);
}

int Streams::open(int group) const {
  int n = 0;
  for (const auto& s : streams_) n += s->group == group && s->open ? 1 : 0;
  return n;
}

bool Streams::held(int group, const LastLine* last) const {
  for (const auto& s : streams_) {
    if (s->group != group || !s->open || !s->paused || (last != nullptr && s->route.last != last)) continue;
    // The pipe keeps what the writer wrote until this stream reads again, so
    // once it holds bytes it stays held until the console drains.
    int unread = 0;
    if (ioctl(s->fd, FIONREAD, &unread) == 0 && unread > 0) return true;
  }
  return false;
}

void Streams::Drain(int group) {
  if (open(group) == 0 || drains_.contains(group)) return;
  drains_[group] = std::make_unique<asio::steady_timer>(io_);
  ArmDrain(group);
}

void Streams::ArmDrain(int group) {
  asio::steady_timer& timer = *drains_[group];
  std::weak_ptr<int> alive = alive_;
  timer.expires_after(kDrainTimeout);
  timer.async_wait([this, group, alive](boost::system::error_code ec) {
    if (ec || alive.expired()) return;
    std::vector<Stream*> left;
    bool paused = false;
    for (auto& s : streams_) {
      if (s->group != group || !s->open) continue;
      left.push_back(s.get());
      paused = paused || s->paused;
    }
    if (paused && console_.full()) {
      // The wait was the console's, not the pipe's: the clock starts again once it drains.
      console_.WhenRoom([this, group, alive] {
        if (!alive.expired()) ArmDrain(group);
      });
      return;
    }
    for (Stream* s : left) Close(s);
    for (Stream* s : left)
      if (s->on_close) s->on_close();
  });
}

void Streams::CloseAll() {
  for (auto& [group, timer] : drains_) timer->cancel();
  for (auto& s : streams_) Close(s.get());
}

Reaper::Reaper(asio::io_context& io, std::function<void(int pid, int status)> on_exit, std::function<void()> after)
    : sigchld_(io), on_exit_(std::move(on_exit)), after_(std::move(after)) {}

void Reaper::Start() {
  stopped_ = false;
  sigchld_.add(SIGCHLD);
  Wait();
}

void Reaper::Stop() {
  stopped_ = true;
  boost::system::error_code ignored;
  sigchld_.cancel(ignored);
}

void Reaper::Wait() {
  sigchld_.async_wait([this, alive = life_.token()](boost::system::error_code ec, int) {
    // Cancelled, or a SIGCHLD queued just before this reaper went or stopped.
    if (ec || alive.expired() || stopped_) return;
    ReapNow();
    if (after_) after_();
    Wait();
  });
}

namespace {
// Every Reaper's reaps (Reaper::reaped); the launcher has one thread.
uint64_t reaped_children = 0;
}  // namespace

uint64_t Reaper::reaped() { return reaped_children; }

void Reaper::ReapNow() {
  // The launcher is a subreaper (and may be PID 1): besides its children,
  // orphaned grandchildren are reparented here and must be reaped too.
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    ++reaped_children;
    on_exit_(pid, status);
  }
}

}  // namespace dlaunch::launcher
