#include "launcher/metrics/metrics.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

namespace dlaunch::launcher {
namespace {

// A number field of a row; nullopt when it is missing or not a number.
std::optional<double> Number(const boost::json::object& row, std::string_view key) {
  const boost::json::value* v = row.if_contains(key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->to_number<double>();
}

}  // namespace

// A scrape a second makes every syscall here count (bench/run.sh's scrape row):
// the descriptors stay open from the first scrape on (two of process_open_fds),
// so that a scrape costs getrusage, one pread and one fstat, where opening,
// reading and closing /proc/self/stat and reading /proc/self/fd entry by entry
// took about half of a scrape's CPU (bench/profile/metrics.md).
SelfUsage ReadSelfUsage() {
  static const int statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  static const int fd_dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  SelfUsage u;
  rusage r{};
  if (getrusage(RUSAGE_SELF, &r) == 0)
    u.cpu_seconds = static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
                    static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
  // statm: "size resident shared ..." in pages.
  char buf[128];
  ssize_t n = statm < 0 ? -1 : pread(statm, buf, sizeof buf - 1, 0);
  if (n > 0) {
    buf[n] = '\0';
    char* end = nullptr;
    std::strtoull(buf, &end, 10);
    unsigned long long resident = std::strtoull(end, nullptr, 10);
    u.rss_bytes = static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
  }
  // Linux 6.2 and later give the number of open descriptors as the size of
  // /proc/PID/fd; older kernels say 0, and the entries are counted instead.
  struct stat st {};
  if (fd_dir >= 0 && fstat(fd_dir, &st) == 0 && st.st_size > 0) {
    u.open_fds = static_cast<double>(st.st_size);
  } else if (DIR* d = opendir("/proc/self/fd")) {
    int count = 0;
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++count;
    closedir(d);
    u.open_fds = count - 1;  // less the directory's own descriptor
  }
  return u;
}

LoopLag::LoopLag(boost::asio::io_context& io, std::function<MetricsClock::time_point()> now)
    : timer_(io), now_(std::move(now)), next_due_(OnTimerGrid(now_() + kPeriod)) {}

void LoopLag::Start() {
  next_due_ = OnTimerGrid(now_() + kPeriod);
  Arm();
}

void LoopLag::Arm() {
  timer_.expires_at(next_due_);
  timer_.async_wait([this, alive = life_.token()](boost::system::error_code ec) {
    if (ec || alive.expired()) return;
    Ticked(next_due_, now_());
    Arm();
  });
}

void LoopLag::Ticked(MetricsClock::time_point due, MetricsClock::time_point at) {
  last_late_ = std::max(MetricsClock::duration::zero(), at - due);
  next_due_ = OnTimerGrid(at + kPeriod);
}

MetricsClock::duration LoopLag::Lag(MetricsClock::time_point now) const {
  return std::max({last_late_, now - next_due_, MetricsClock::duration::zero()});
}

std::string_view RankStateOf(std::string_view s) {
  if (s == "not started") return "not_started";
  if (s.starts_with("exited")) return "exited";
  if (s.starts_with("killed")) return "killed";
  return "running";  // running, sleeping, stopped, disk-wait, idle, zombie, exiting: a process not reaped yet
}

int WriteRankMetrics(const boost::json::array& rows, Exposition& out) {
  int running = 0;
  for (const boost::json::value& v : rows) {
    const boost::json::object* row = v.if_object();
    if (row == nullptr) continue;
    std::optional<double> rank = Number(*row, "rank");
    const boost::json::value* state = row->if_contains("state");
    if (!rank || state == nullptr || !state->is_string()) continue;
    std::string r = fmt::format("{}", static_cast<long long>(*rank));
    std::string_view now = RankStateOf(std::string_view(state->as_string()));
    for (const char* s : kRankStates) out.Add("dlaunch_rank_state", s == now ? 1 : 0, {{"rank", r}, {"state", s}});
    if (std::optional<double> code = Number(*row, "exit_code")) out.Add("dlaunch_rank_exit_code", *code, {{"rank", r}});
    if (std::optional<double> silent = Number(*row, "silent_s"))
      out.Add("dlaunch_rank_silent_seconds", *silent, {{"rank", r}});
    if (std::optional<double> restarts = Number(*row, "restarts"))
      out.Add("dlaunch_rank_restarts_total", *restarts, {{"rank", r}});
    // Several programs: which group each rank runs, to join on `rank`.
    if (const boost::json::value* role = row->if_contains("role"); role != nullptr && role->is_string())
      out.Add("dlaunch_rank_info", 1, {{"rank", r}, {"role", std::string(role->as_string())}});
    if (Number(*row, "pid").value_or(0) != 0) ++running;
  }
  return running;
}

void WriteServerCounters(const rendezvous::CoordinatorServer::Counters& c, Exposition& out) {
  out.Add("dlaunch_nodes_joined_total", static_cast<double>(c.joined));
  out.Add("dlaunch_nodes_lost_total", static_cast<double>(c.nodes_lost));
  out.Add("dlaunch_spares", static_cast<double>(c.spares));
  out.Add("dlaunch_rendezvous_attempts_total", static_cast<double>(c.hellos));
  out.Add("dlaunch_auth_refusals_total", static_cast<double>(c.auth_refused));
}

void WriteSelf(const SelfUsage& self, MetricsClock::duration lag, Exposition& out) {
  out.Add("dlaunch_event_loop_lag_seconds", std::chrono::duration<double>(lag).count());
  out.Add("process_resident_memory_bytes", self.rss_bytes);
  out.Add("process_open_fds", self.open_fds);
  out.Add("process_cpu_seconds_total", self.cpu_seconds);
}

LauncherMetrics::LauncherMetrics(std::string mode, int world_size, const RunLiveSource& live)
    : mode_(std::move(mode)), world_size_(world_size), live_(live) {}

void LauncherMetrics::OnEvent(std::string_view event, const boost::json::object& fields) {
  if (event == "hang_suspected") ++hangs_;
  if (event == "stacks") ++stacks_;
  if (event == "health_check") {
    const boost::json::value* ok = fields.if_contains("ok");
    held_out_ = ok != nullptr && ok->is_bool() && !ok->as_bool();
    if (held_out_) ++health_failures_;
  }
  if (event == "restart" || event == "rendezvous") {
    const boost::json::value* r = fields.if_contains("restart");
    if (r != nullptr && r->is_int64()) restarts_ = std::max(restarts_, r->as_int64());
  }
  if (event == "straggler_window") {
    sync_share_.clear();
    if (const boost::json::value* m = fields.if_contains("sync_pct"); m != nullptr && m->is_object())
      for (const auto& kv : m->as_object())
        if (std::optional<int> rank = ParseInt(kv.key()); rank && kv.value().is_number())
          sync_share_[*rank] = kv.value().to_number<double>() / 100;
  }
  if (event == "straggler") {
    const boost::json::value* state = fields.if_contains("state");
    bool named = state != nullptr && state->is_string() && state->as_string() == "named";
    if (named) ++stragglers_named_;
    stragglers_ = std::max<std::int64_t>(0, stragglers_ + (named ? 1 : -1));
  }
  if (event == "rendezvous") {
    const boost::json::value* w = fields.if_contains("world_size");
    if (w != nullptr && w->is_int64()) world_size_ = static_cast<int>(w->as_int64());
  }
}

bool LauncherMetrics::Ready() const {
  WorkerRun* run = live_.run();
  if (run == nullptr) return false;
  Exposition ignored;
  return WriteRankMetrics(run->RecordRows(), ignored) > 0;
}

void LauncherMetrics::Write(Exposition& out) const {
  out.Add("dlaunch_job_info", 1, {{"run_id", live_.job().run_id}, {"mode", mode_}});
  // One reading of the rows for every per-rank metric: Text() orders the samples by the table.
  WorkerRun* run = live_.run();
  int running = run != nullptr ? WriteRankMetrics(run->RecordRows(), out) : 0;
  out.Add("dlaunch_ready", running > 0 ? 1 : 0);
  out.Add("dlaunch_world_size", world_size_);
  out.Add("dlaunch_ranks_running", running);
  out.Add("dlaunch_restarts_total", static_cast<double>(restarts_));
  out.Add("dlaunch_hangs_detected_total", static_cast<double>(hangs_));
  out.Add("dlaunch_stacks_taken_total", static_cast<double>(stacks_));
  out.Add("dlaunch_health_check_failures_total", static_cast<double>(health_failures_));
  out.Add("dlaunch_node_held_out", held_out_ ? 1 : 0);
  for (const auto& [rank, share] : sync_share_)
    out.Add("dlaunch_rank_sync_share", share, {{"rank", std::to_string(rank)}});
  out.Add("dlaunch_stragglers", static_cast<double>(stragglers_));
  out.Add("dlaunch_stragglers_named_total", static_cast<double>(stragglers_named_));
  if (server_ != nullptr) WriteServerCounters(server_->counters(), out);
}

MetricsAnswer AnswerMetricsRequest(std::string_view method, std::string_view target, const MetricsPages& pages,
                                   MetricsClock::duration lag) {
  std::string_view path = target.substr(0, target.find('?'));
  MetricsAnswer a;
  if (path != "/metrics" && path != "/healthz" && path != "/readyz") {
    a.status = 404;
    a.body = "not found: try /metrics, /healthz or /readyz\n";
    return a;
  }
  if (method != "GET" && method != "HEAD") {
    a.status = 405;
    a.allow = "GET, HEAD";
    a.body = "method not allowed: GET or HEAD\n";
    return a;
  }
  if (path == "/healthz") {
    bool ok = lag <= LoopLag::kBound;
    a.status = ok ? 200 : 503;
    a.body = ok ? "ok\n"
                : fmt::format("event loop behind by {:.1f}s (over {}s)\n", std::chrono::duration<double>(lag).count(),
                              std::chrono::duration_cast<std::chrono::seconds>(LoopLag::kBound).count());
    return a;
  }
  if (path == "/readyz") {
    bool ok = !pages.ready || pages.ready();
    a.status = ok ? 200 : 503;
    a.body = ok ? "ready\n" : "not ready: the workers do not run yet\n";
    return a;
  }
  Exposition e;
  if (pages.write) pages.write(e);
  WriteSelf(ReadSelfUsage(), lag, e);
  a.content_type = kExpositionContentType;
  a.body = e.Text();
  return a;
}

}  // namespace dlaunch::launcher
