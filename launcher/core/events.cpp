#include "launcher/core/events.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include <boost/json/serialize.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>

namespace dlaunch::launcher {

EventLog::~EventLog() {
  if (fd_ >= 0) close(fd_);
}

Status EventLog::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO without a reader fails at once (ENXIO) instead
  // of hanging, and a full pipe later refuses an event instead of stopping the
  // loop that carries heartbeats and signals. A regular file ignores it.
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) {
    const char* why = errno == ENXIO ? "a FIFO with no reader" : std::strerror(errno);
    return Status::InvalidArgument(fmt::format("--events {}: cannot open ({})", path, why));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))) {
    close(fd);
    return Status::InvalidArgument(fmt::format("--events {}: not a file, a FIFO or a device", path));
  }
  fd_ = fd;
  return Status::Ok();
}

void EventLog::Emit(std::string_view event, boost::json::object fields) {
  if (fd_ < 0) return;
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  boost::json::object line;
  line["event"] = event;
  line["time"] = fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:06}Z", tm, micros);
  line["run_id"] = run_id_;
  if (node_rank_ >= 0) line["node_rank"] = node_rank_;
  for (auto& [k, v] : fields) line[k] = std::move(v);
  std::string text = boost::json::serialize(line) + "\n";
  ssize_t n;
  do {
    n = write(fd_, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(text.size())) ++dropped_;
}

}  // namespace dlaunch::launcher
