#include "launcher/straggler/straggler_watch.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <boost/json/array.hpp>
#include <fmt/format.h>

#include "base/defaults.hpp"
#include "launcher/core/dir_walk.hpp"
#include "launcher/core/output.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

namespace {

// A share as a whole percentage: events carry integers (as the console's
// lines do), not a double that JSON writes as 7E-1.
std::int64_t Pct(double share) { return std::llround(share * 100); }

}  // namespace

StragglerWatch::StragglerWatch(Timers& timers, EventLog& events, StragglerWatchOptions options, Gather gather,
                               Hooks hooks)
    : timers_(timers),
      events_(events),
      options_(std::move(options)),
      gather_(std::move(gather)),
      hooks_(std::move(hooks)),
      detector_(options_.detect),
      timer_(timers.NewTimer()) {
  Arm();
}

StragglerWatch::~StragglerWatch() { *alive_ = false; }

void StragglerWatch::NewGeneration() {
  for (const Straggler& s : detector_.named()) {
    hooks_.say(ClearedLine(s) + " (the workers restarted)");
    events_.Emit("straggler", StragglerFields(s, "cleared", window_));
  }
  detector_.Reset();
  last_.clear();
  ++generation_;
  gathering_ = false;
  Arm();
}

void StragglerWatch::Arm() {
  timer_->At(timers_.Now() + options_.window, [this] {
    Arm();
    if (gathering_ || stopped_) return;  // the last question is still out: this window waits for it
    gathering_ = true;
    gather_([this, alive = std::weak_ptr<bool>(alive_), generation = generation_](std::vector<RankWindow> ranks) {
      if (alive.expired() || generation != generation_) return;
      gathering_ = false;
      Compare(std::move(ranks));
    });
  });
}

void StragglerWatch::Compare(std::vector<RankWindow> ranks) {
  if (ranks.empty()) return;  // no rank runs (between generations), or none sampled yet
  std::sort(ranks.begin(), ranks.end(), [](const RankWindow& a, const RankWindow& b) { return a.rank < b.rank; });
  WindowVerdict v = detector_.Window(ranks);
  last_ = std::move(ranks);
  ++window_;
  boost::json::object shares;
  for (const auto& [rank, share] : v.sync_share) shares[std::to_string(rank)] = Pct(share);
  events_.Emit("straggler_window", {{"window", window_}, {"sync_pct", std::move(shares)}});
  for (const Straggler& s : v.cleared) {
    hooks_.say(ClearedLine(s));
    events_.Emit("straggler", StragglerFields(s, "cleared", window_));
  }
  for (const Straggler& s : v.named) Named(s);
}

void StragglerWatch::Named(const Straggler& s) {
  std::string line = NamedLine(s);
  events_.Emit("straggler", StragglerFields(s, "named", window_));
  // With stop, the line is the job's root cause, which the stop says.
  if (!options_.stop || stopped_) return hooks_.say(line);
  stopped_ = true;
  if (!options_.file.empty()) {
    if (Status w = WriteStragglerFile(options_.file, {s.host}); !w.ok())
      hooks_.say(fmt::format("straggler: cannot write --straggler-file {} ({})", options_.file, w.message()));
  }
  hooks_.stop(base::kExitStraggler,
              fmt::format("{} (--straggler-action stop; exit code {})", line, base::kExitStraggler));
}

boost::json::object StragglerFields(const Straggler& s, std::string_view state, int window) {
  boost::json::array ranks;
  for (int r : s.ranks) ranks.emplace_back(r);
  boost::json::object o{{"state", state},
                        {"scope", s.scope == Straggler::Scope::kNode ? "node" : "rank"},
                        {"ranks", std::move(ranks)},
                        {"node", s.node_rank},  // the straggler's: every event's node_rank is its writer's
                        {"host", s.host},
                        {"role", s.role},
                        {"sync_pct", Pct(s.sync_share)},
                        {"others_sync_pct", Pct(s.others_sync_share)},
                        {"window", window}};
  if (!s.sync_frame.empty()) o["sync_frame"] = s.sync_frame;
  if (!s.frame.empty()) {
    o["frame"] = s.frame;
    o["frame_pct"] = Pct(s.frame_share);
    o["others_frame_pct"] = Pct(s.others_frame_share);
  }
  return o;
}

Status WriteStragglerFile(const std::string& path, const std::vector<std::string>& hosts) {
  // A node names itself when it joins: one line a host, nothing a line cannot hold.
  for (const std::string& h : hosts)
    if (h.empty() || Printable(h) != h)
      return Status::InvalidArgument(fmt::format("host name '{}' is not one a line holds", PrintablePrefix(h, 64)));
  // Its directory is walked as a path the user names is (dir_walk.hpp): a
  // link another user planted in /tmp on the way is refused.
  std::filesystem::path p(path);
  Result<WalkedDir> dir = WalkToDir(p.has_parent_path() ? p.parent_path().string() : ".");
  if (!dir.ok()) return dir.status();
  int fd = openat(dir->fd(), p.filename().c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Io(std::strerror(errno));
  struct stat st {};
  // Truncated only once it is known to be a regular file of this user's with
  // one name: a FIFO or a device put at the path, another user's file (planted
  // in /tmp, to read the host or to rewrite it after) or a hard link to some
  // other file is refused untouched.
  std::string why;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else if (st.st_uid != geteuid()) {
    why = fmt::format("owned by uid {}, not by this user", st.st_uid);
  } else if (st.st_nlink != 1) {
    why = fmt::format("a file of {} hard links", st.st_nlink);
  } else if (ftruncate(fd, 0) != 0) {
    why = std::strerror(errno);
  }
  if (!why.empty()) {
    close(fd);
    return Status::Io(why);
  }
  std::string text;
  for (const std::string& h : hosts) text += h + "\n";
  WriteAll(fd, text);
  close(fd);
  return Status::Ok();
}

}  // namespace dlaunch::launcher
