#include "launcher/process/streams.hpp"

#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctime>

namespace dlaunch::launcher {

namespace asio = boost::asio;

struct Streams::Stream {
  // The buffer is left uninitialised: zeroing 256 KiB per pipe was a third of
  // a short job's start-up CPU, and a read touches only the pages it fills.
  Stream(asio::io_context& io, int fd, size_t size)
      : sd(io, fd), fd(fd), buf(std::make_unique_for_overwrite<char[]>(size)), size(size) {}
  asio::posix::stream_descriptor sd;
  int fd;  // sd's, for FIONREAD (held)
  int group = 0;
  StreamRoute route;
  LineTagger tagger;
  std::function<void()> on_close;
  bool open = true;
  bool paused = false;  // waiting for room on the console
  std::unique_ptr<char[]> buf;
  size_t size;
};

Streams::Streams(asio::io_context& io, Console& console, size_t read_size)
    : io_(io), console_(console), read_size_(read_size) {}

// Handlers still queued on the io_context check `alive_` and do nothing.
Streams::~Streams() { CloseAll(); }

void Streams::Add(int fd, int group, StreamRoute route, std::function<void()> on_close) {
  auto s = std::make_unique<Stream>(io_, fd, read_size_);
  s->group = group;
  s->route = std::move(route);
  s->on_close = std::move(on_close);
  Stream* raw = s.get();
  streams_.push_back(std::move(s));
  Read(raw);
}

void Streams::Read(Stream* s) {
  std::weak_ptr<int> alive = alive_;
  s->sd.async_read_some(asio::buffer(s->buf.get(), s->size), [this, s, alive](boost::system::error_code ec, size_t n) {
    if (alive.expired() || !s->open) return;
    StreamRoute& r = s->route;
    if (n > 0) {
      auto now = std::chrono::steady_clock::now();
      if (r.progress != nullptr) *r.progress = now;
      if (r.last != nullptr) r.last->Append(std::string_view(s->buf.get(), n), now);
      if (r.console) {
        if (!r.format.empty()) r.prefix = RenderTag(r.format, r.fields, std::time(nullptr)).value();
        out_.clear();
        s->tagger.Feed(std::string_view(s->buf.get(), n), r.prefix, out_);
        console_.Write(*r.console, out_);
      }
      if (r.file_fd >= 0) WriteAll(r.file_fd, std::string_view(s->buf.get(), n));
      if (r.tail != nullptr) r.tail->Append(std::string_view(s->buf.get(), n));
    }
    if (ec) {
      Close(s);
      if (s->on_close) s->on_close();
      return;
    }
    if (r.console && console_.full()) {
      // Back-pressure: the writer blocks on its full pipe, as under a slow terminal.
      s->paused = true;
      console_.WhenRoom([this, s, alive] {
        if (alive.expired() || !s->open) return;
        s->paused = false;
        Read(s);
      });
      return;
    }
    Read(s);
  });
}

void Streams::Close(Stream* s) {
  if (!s->open) return;
  s->open = false;
  if (s->route.console) {
    out_.clear();
    s->tagger.Finish(s->route.prefix, out_);
    console_.Write(*s->route.console, out_);
  }
  if (s->route.file_fd >= 0) close(s->route.file_fd);
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

void Reaper::ReapNow() {
  // The launcher is a subreaper (and may be PID 1): besides its children,
  // orphaned grandchildren are reparented here and must be reaped too.
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) on_exit_(pid, status);
}

}  // namespace dlaunch::launcher
