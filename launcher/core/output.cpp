#include "launcher/core/output.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/chrono.h>
#include <fmt/format.h>

namespace dlaunch::launcher {

size_t ReadPresent(int fd, char* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t m = read(fd, p + got, n - got);
    if (m > 0) {
      got += static_cast<size_t>(m);
    } else if (!(m < 0 && errno == EINTR)) {
      break;
    }
  }
  return got;
}

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 1000);
    } else {
      return;  // a closed console: the output has nowhere to go
    }
  }
}

void LineTagger::Feed(std::string_view data, std::string_view prefix, std::string& out) {
  while (!data.empty()) {
    // A line body may hold up to max_line_ bytes; look one further for its newline.
    size_t room = max_line_ - partial_.size();
    const void* nl = std::memchr(data.data(), '\n', std::min(data.size(), room + 1));
    if (nl == nullptr) {
      if (data.size() <= room) {
        partial_.append(data);
        return;
      }
      // Cut an over-long line at the cap and carry on. A tagged piece becomes a
      // line of its own; untagged bytes go on as they came.
      out.append(prefix).append(partial_).append(data.substr(0, room));
      if (!prefix.empty()) out.push_back('\n');
      partial_.clear();
      data.remove_prefix(room);
      continue;
    }
    size_t len = static_cast<size_t>(static_cast<const char*>(nl) - data.data()) + 1;
    out.append(prefix);
    if (!partial_.empty()) {
      out.append(partial_);
      partial_.clear();
    }
    out.append(data.substr(0, len));
    data.remove_prefix(len);
  }
}

void LineTagger::Finish(std::string_view prefix, std::string& out) {
  if (partial_.empty()) return;
  out.append(prefix).append(partial_);
  if (!prefix.empty()) out.push_back('\n');
  partial_.clear();
}

Result<std::string> RenderTag(const std::string& format, const TagFields& f, std::time_t now) {
  try {
    std::tm tm{};
    localtime_r(&now, &tm);
    return fmt::format(fmt::runtime(format), fmt::arg("rank", f.rank), fmt::arg("local_rank", f.local_rank),
                       fmt::arg("node_rank", f.node_rank), fmt::arg("role", f.role), fmt::arg("stream", f.stream),
                       fmt::arg("host", f.host), fmt::arg("time", fmt::format("{:%Y-%m-%dT%H:%M:%S}", tm)));
  } catch (const fmt::format_error& e) {
    return Status::InvalidArgument(fmt::format("--tag-output: bad format '{}' ({})", format, e.what()));
  }
}

void TailBuffer::Append(std::string_view data) {
  if (data.size() >= max_) {
    buf_.assign(data.substr(data.size() - max_));
    return;
  }
  buf_.append(data);
  if (buf_.size() > 2 * max_) buf_.erase(0, buf_.size() - max_);
}

std::vector<std::string> TailBuffer::LastLines(size_t n) const {
  std::string_view v = buf_;
  if (v.size() > max_) v.remove_prefix(v.size() - max_);
  while (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  std::vector<std::string> lines;
  while (!v.empty() && lines.size() < n) {
    size_t nl = v.rfind('\n');
    std::string_view line = nl == std::string_view::npos ? v : v.substr(nl + 1);
    lines.emplace(lines.begin(), line);
    if (nl == std::string_view::npos) break;
    v = v.substr(0, nl);
  }
  return lines;
}

namespace {

// Keeps the last `max` bytes of `s`.
void KeepTail(std::string& s, size_t max) {
  if (s.size() > max) s.erase(0, s.size() - max);
}

}  // namespace

void LastLine::Append(std::string_view data, std::chrono::steady_clock::time_point now) {
  if (data.empty()) return;
  at_ = now;
  size_t nl = data.rfind('\n');
  if (nl != std::string_view::npos) {
    size_t prev = nl == 0 ? std::string_view::npos : data.rfind('\n', nl - 1);
    if (prev == std::string_view::npos) {
      partial_.append(data.substr(0, std::min(nl, 2 * max_)));
      done_ = std::move(partial_);
    } else {
      done_.assign(data.substr(prev + 1, nl - prev - 1));
    }
    KeepTail(done_, 2 * max_);
    partial_.clear();
    data.remove_prefix(nl + 1);
  }
  partial_.append(data.substr(data.size() > 2 * max_ ? data.size() - 2 * max_ : 0));
  KeepTail(partial_, 2 * max_);
}

std::string LastLine::line() const {
  // A partial made of '\r's and blanks alone (a bar being redrawn) shows the last line.
  std::string_view v = partial_.find_first_not_of(" \r") != std::string::npos ? partial_ : done_;
  while (!v.empty() && v.back() == '\r') v.remove_suffix(1);
  size_t cr = v.rfind('\r');
  if (cr != std::string_view::npos) v.remove_prefix(cr + 1);
  return std::string(v.substr(0, max_));
}

}  // namespace dlaunch::launcher
