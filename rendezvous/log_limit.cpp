#include "rendezvous/log_limit.hpp"

#include <algorithm>

namespace dlaunch::rendezvous {

LogLimiter::LogLimiter(Sink sink, std::chrono::milliseconds window, std::size_t burst)
    : sink_(std::move(sink)), window_(window), burst_(burst) {}

void LogLimiter::Log(const std::string& key, const std::string& line, Held held, Clock::time_point now) {
  if (!sink_) return;
  auto it = windows_.find(key);
  if (it != windows_.end() && now - it->second.start >= window_) {
    End(it);
    it = windows_.end();
  }
  if (it == windows_.end()) it = windows_.emplace(key, Window{now, 0, 0, {}}).first;
  Window& w = it->second;
  w.held_line = std::move(held);
  if (w.written < burst_) {
    ++w.written;
    sink_(line);
  } else {
    ++w.held;
  }
}

void LogLimiter::Tick(Clock::time_point now) {
  for (auto it = windows_.begin(); it != windows_.end();) {
    auto next = std::next(it);
    if (now - it->second.start >= window_) End(it);
    it = next;
  }
}

void LogLimiter::Flush() {
  while (!windows_.empty()) End(windows_.begin());
}

void LogLimiter::End(std::map<std::string, Window>::iterator it) {
  Window w = std::move(it->second);
  windows_.erase(it);
  if (w.held > 0 && w.held_line && sink_) sink_(w.held_line(w.held));
}

AcceptBackoff::Retry AcceptBackoff::Failed(Clock::time_point now) {
  wait_ = wait_.count() == 0 ? std::chrono::milliseconds(100)
                             : std::min<std::chrono::milliseconds>(wait_ * 2, std::chrono::seconds(1));
  Retry retry{wait_};
  if (!unanswered_ && (!said_ || now - *said_ >= std::chrono::minutes(1))) {
    said_ = now;
    unanswered_ = retry.say = true;
  }
  return retry;
}

bool AcceptBackoff::Accepted() {
  wait_ = std::chrono::milliseconds(0);
  bool answer = unanswered_;
  unanswered_ = false;
  return answer;
}

}  // namespace dlaunch::rendezvous
