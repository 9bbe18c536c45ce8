#include "launcher/core/events.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include "launcher/core/dir_walk.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

EventLog::~EventLog() {
  if (fd_ >= 0) close(fd_);
}

namespace {

// Every string value in `v` as valid UTF-8 (the keys are dlaunch's own): a run
// id, an argument or a host name may hold any bytes, and a line that a JSON
// parser refuses loses the event.
void MakeValidUtf8(boost::json::value& v) {
  if (boost::json::string* s = v.if_string()) {
    *s = ValidUtf8(*s);
  } else if (boost::json::array* a = v.if_array()) {
    for (boost::json::value& e : *a) MakeValidUtf8(e);
  } else if (boost::json::object* o = v.if_object()) {
    for (auto& kv : *o) MakeValidUtf8(kv.value());
  }
}

}  // namespace

Status EventLog::Check(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode) && st.st_uid != geteuid() && st.st_uid != 0)
    return Status::InvalidArgument(fmt::format(
        "--events {}: refused (a symbolic link owned by uid {}; only yours or root's are followed)", path, st.st_uid));
  if (stat(path.c_str(), &st) == 0) {
    if (!(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)))
      return Status::InvalidArgument(fmt::format("--events {}: not a file, a FIFO or a device", path));
    if (faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) != 0)
      return Status::InvalidArgument(fmt::format("--events {}: cannot open ({})", path, std::strerror(errno)));
    return Status::Ok();
  }
  if (errno != ENOENT)
    return Status::InvalidArgument(fmt::format("--events {}: cannot open ({})", path, std::strerror(errno)));
  // Nothing there: the file would be made in its directory.
  std::string dir = path.substr(0, path.find_last_of('/') + 1);
  if (dir.size() > 1) dir.pop_back();
  int fd = open(dir.empty() ? "." : dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::InvalidArgument(fmt::format("--events {}: cannot open ({})", path, std::strerror(errno)));
  Status may = MayMakeIn(fd, dir.empty() ? "." : dir);
  close(fd);
  if (!may.ok()) return Status::InvalidArgument(fmt::format("--events {}: cannot open ({})", path, may.message()));
  return Status::Ok();
}

Status EventLog::Open(const std::string& path) {
  if (Status s = Check(path); !s.ok()) return s;
  // O_NONBLOCK: opening a FIFO without a reader fails at once (ENXIO) instead
  // of hanging, and a full pipe later refuses an event instead of stopping the
  // loop that carries heartbeats and signals. A regular file ignores it.
  // O_NOFOLLOW: a symbolic link another user planted (in /tmp, say) must not
  // make us append to a file of ours it points at. One of our own or root's
  // (/dev/stdout) is followed: its owner could have written the file anyway.
  constexpr int kFlags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK;
  int fd = open(path.c_str(), kFlags | O_NOFOLLOW, 0644);
  // A link makes that open fail with ELOOP, or with EACCES on some kernels
  // when it dangles in a sticky directory: lstat tells which it was.
  struct stat link {};
  if (fd < 0 && (errno == ELOOP || errno == EACCES) && lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    if (link.st_uid != geteuid() && link.st_uid != 0)
      return Status::InvalidArgument(
          fmt::format("--events {}: refused (a symbolic link owned by uid {}; only yours or root's are followed)", path,
                      link.st_uid));
    fd = open(path.c_str(), kFlags, 0644);
  }
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
  if (observer_) observer_(event, fields);
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
  boost::json::value whole = std::move(line);
  MakeValidUtf8(whole);
  std::string text = boost::json::serialize(whole) + "\n";
  ssize_t n;
  do {
    n = write(fd_, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(text.size())) ++dropped_;
}

}  // namespace dlaunch::launcher
