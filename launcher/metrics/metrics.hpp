// What /metrics, /healthz and /readyz say (--metrics-addr; the table of metrics
// is launcher/metrics/prometheus.hpp). Everything here READS the parts that hold
// the state and keeps none of its own beyond counts of events:
//   - each rank: the rows of `dlaunch status` (WorkerRun::RecordRows, the same
//     rows without /proc, through the live view's RunLiveSource,
//     live/live.hpp), so the two always agree;
//   - hangs, stacks, restarts and the world size: the events the parts already
//     report (EventLog::Observe; the same events --events writes);
//   - nodes joined and lost, rendezvous attempts, auth refusals: the
//     coordinator server's counters (rendezvous/server.hpp);
//   - dlaunch itself: /proc/self, and the event loop's lag (LoopLag).
// A scrape reads what is there now: rows are built from memory and /proc/self,
// never by asking a worker or another node.
// Every call happens on the event loop's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <map>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include "launcher/core/event_loop.hpp"
#include "launcher/live/live.hpp"
#include "launcher/metrics/prometheus.hpp"
#include "rendezvous/server.hpp"

namespace dlaunch::launcher {

using MetricsClock = std::chrono::steady_clock;

// dlaunch's own process: resident memory (/proc/self/statm), open descriptors
// (/proc/self/fd), CPU (getrusage). Safe from any thread.
struct SelfUsage {
  double rss_bytes = 0;
  double open_fds = 0;
  double cpu_seconds = 0;
};
SelfUsage ReadSelfUsage();

// The event loop's watchdog, behind /healthz: a timer ticks every kPeriod, and
// the lag is how late the loop ran its last tick, or how overdue the next tick
// is now, whichever is more. The HTTP server runs on the same loop, so a loop
// that is stopped (SIGSTOP) or blocked does not answer at all, and a probe's
// timeout says so; 503 is what a loop that has just come back says: it was
// behind by more than kBound (starved of CPU, stopped and continued, or a
// handler that blocked), and it answers 200 again after a tick on time.
class LoopLag {
 public:
  // Default: a tick every 2 s, the bound itself, so that a stall over the bound
  // always spans a tick's due time. A wakeup costs about 0.2 ms on this project's
  // (virtual) machines: 10 a second cost 3.6 s of CPU an hour, and one a second
  // 0.6 s, most of a quiet job's whole budget (bench/run.sh).
  static constexpr std::chrono::milliseconds kPeriod{2000};
  // Ticks land on the timer grid (launcher/core/event_loop.hpp), where the
  // scans for adopted processes also run: one wakeup for both.
  static_assert(kPeriod >= kTimerGrid);
  static constexpr std::chrono::milliseconds kBound{2000};  // Default: 2s behind is unhealthy

  explicit LoopLag(boost::asio::io_context& io, std::function<MetricsClock::time_point()> now = MetricsClock::now);
  // Arms the first tick.
  void Start();
  // A tick due at `due` ran at `at` (the timer's handler; tests call it).
  void Ticked(MetricsClock::time_point due, MetricsClock::time_point at);
  MetricsClock::duration Lag(MetricsClock::time_point now) const;
  bool Healthy(MetricsClock::time_point now) const { return Lag(now) <= kBound; }

 private:
  void Arm();
  boost::asio::steady_timer timer_;
  std::function<MetricsClock::time_point()> now_;
  MetricsClock::time_point next_due_;
  MetricsClock::duration last_late_{};
  Lifetime life_;  // last: expires first
};

// The per-rank metrics of `rows` (WorkerRun::Rows' objects; a row missing a field
// is skipped), and how many of them run: a rank runs while it has a pid (the
// `dlaunch status` row's "pid" is not 0). Pure.
int WriteRankMetrics(const boost::json::array& rows, Exposition& out);
// dlaunch_rank_state's state for a row's "state" word ("sleeping" and
// "stopped" -> "running", "exited (3)" -> "exited", "killed (SIGKILL)" -> "killed").
std::string_view RankStateOf(std::string_view row_state);
// The coordinator server's counters as metrics.
void WriteServerCounters(const rendezvous::CoordinatorServer::Counters& c, Exposition& out);
// dlaunch's own usage and loop lag.
void WriteSelf(const SelfUsage& self, MetricsClock::duration lag, Exposition& out);

// A launcher's metrics (single node, static, a rendezvous node; the host also
// has the counters of the coordinator it hosts).
class LauncherMetrics {
 public:
  // `world_size`: the job's, when the flags fix it (0: learnt from the
  // rendezvous event). `live` must outlive this.
  LauncherMetrics(std::string mode, int world_size, const RunLiveSource& live);
  // The EventLog observer (EventLog::Observe): counts hangs, stacks and restarts,
  // and takes the world size from each rendezvous.
  void OnEvent(std::string_view event, const boost::json::object& fields);
  // The coordinator this process hosts (or null); it must stay alive until replaced.
  void SetCoordinator(const rendezvous::CoordinatorServer* server) { server_ = server; }
  // /readyz: this node's workers of the current generation have started, and
  // one runs at least.
  bool Ready() const;
  void Write(Exposition& out) const;

 private:
  std::string mode_;
  int world_size_;
  const RunLiveSource& live_;
  const rendezvous::CoordinatorServer* server_ = nullptr;
  std::uint64_t hangs_ = 0;
  std::uint64_t stacks_ = 0;
  std::uint64_t health_failures_ = 0;  // health_check events with ok false
  std::map<int, double> sync_share_;   // by rank: the last straggler_window event's
  std::int64_t stragglers_ = 0;        // named and not cleared, by the straggler events
  std::uint64_t stragglers_named_ = 0;
  bool held_out_ = false;  // the last health_check failed
  std::int64_t restarts_ = 0;
};

// What a dlaunch's pages say: its metrics (besides WriteSelf's, which every
// dlaunch adds) and its readiness.
struct MetricsPages {
  std::function<void(Exposition&)> write;
  std::function<bool()> ready;  // empty: always ready (the coordinator, once listening)
};

// One HTTP answer.
struct MetricsAnswer {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::string allow;  // for 405: the methods allowed
};

// The answer to `method` `target` (the request line's; a query string is
// ignored): GET or HEAD of /metrics, /healthz, /readyz; 404 for another path,
// 405 for another method. /healthz is 503 when `lag` is over LoopLag::kBound.
// Pure but for ReadSelfUsage (in /metrics).
MetricsAnswer AnswerMetricsRequest(std::string_view method, std::string_view target, const MetricsPages& pages,
                                   MetricsClock::duration lag);

}  // namespace dlaunch::launcher
