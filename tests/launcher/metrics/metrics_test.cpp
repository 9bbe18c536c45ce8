#include "launcher/metrics/metrics.hpp"

#include <unistd.h>

#include <boost/json/parse.hpp>
#include <catch2/catch.hpp>

namespace dlaunch::launcher {
namespace {

using namespace std::chrono_literals;

boost::json::array MetricsRows(const char* json) { return boost::json::parse(json).as_array(); }

// A run whose rows are given: what `dlaunch status` would show.
class MetricsFakeRun : public WorkerRun {
 public:
  boost::json::array rows;
  int asked = 0;
  boost::json::array Rows() override {
    FAIL("a scrape read /proc (Rows rather than RecordRows)");
    return rows;
  }
  boost::json::array RecordRows() override {
    ++asked;
    return rows;
  }
  void Stacks(std::function<void(std::vector<RankStack>)>) override { FAIL("a scrape asked for stacks"); }
  std::chrono::steady_clock::time_point last_output() const override { return {}; }
};

}  // namespace

TEST_CASE("Rank states: every row state word maps into the fixed set", "[metrics]") {
  CHECK(RankStateOf("not started") == "not_started");
  CHECK(RankStateOf("exited (3)") == "exited");
  CHECK(RankStateOf("killed (SIGKILL)") == "killed");
  for (const char* alive :
       {"running", "sleeping", "stopped", "traced", "disk-wait", "idle", "zombie", "exiting", "unknown"})
    CHECK(RankStateOf(alive) == "running");
}

TEST_CASE("Rank metrics come from the status rows: state, exit code, silence, restarts, running", "[metrics]") {
  Exposition e;
  int running = WriteRankMetrics(MetricsRows(R"j([
      {"rank": 0, "pid": 41, "state": "sleeping", "silent_s": 2.5, "restarts": 1, "role": "trainer"},
      {"rank": 1, "pid": 0, "state": "exited (3)", "exit_code": 3, "silent_s": 0.0, "restarts": 1, "role": "rollout"},
      {"rank": 2, "pid": 0, "state": "not started", "silent_s": 0.0, "restarts": 0},
      {"rank": "junk", "state": "running"}, 7])j"),
                                 e);
  CHECK(running == 1);
  std::string text = e.Text();
  CHECK(text.find("dlaunch_rank_state{rank=\"0\",state=\"running\"} 1\n") != std::string::npos);
  CHECK(text.find("dlaunch_rank_state{rank=\"0\",state=\"exited\"} 0\n") != std::string::npos);
  CHECK(text.find("dlaunch_rank_state{rank=\"1\",state=\"exited\"} 1\n") != std::string::npos);
  CHECK(text.find("dlaunch_rank_state{rank=\"2\",state=\"not_started\"} 1\n") != std::string::npos);
  CHECK(text.find("dlaunch_rank_exit_code{rank=\"1\"} 3\n") != std::string::npos);
  CHECK(text.find("dlaunch_rank_exit_code{rank=\"0\"}") == std::string::npos);  // absent while it runs
  CHECK(text.find("dlaunch_rank_silent_seconds{rank=\"0\"} 2.5\n") != std::string::npos);
  CHECK(text.find("dlaunch_rank_restarts_total{rank=\"1\"} 1\n") != std::string::npos);
  CHECK(text.find("dlaunch_rank_info{rank=\"0\",role=\"trainer\"} 1\n") != std::string::npos);
  CHECK(text.find("dlaunch_rank_info{rank=\"1\",role=\"rollout\"} 1\n") != std::string::npos);
  CHECK(text.find("dlaunch_rank_info{rank=\"2\"") == std::string::npos);  // a row without a role
  CHECK(text.find("junk") == std::string::npos);
}

TEST_CASE("LoopLag: the later of the last tick's lateness and how overdue the next is", "[metrics]") {
  boost::asio::io_context io;
  MetricsClock::time_point t0{};
  MetricsClock::time_point now = t0;
  LoopLag lag(io, [&now] { return now; });
  const auto p = LoopLag::kPeriod;
  lag.Ticked(t0 + p, t0 + p);  // on time
  CHECK(lag.Lag(t0 + p + p / 2) == 0ms);
  CHECK(lag.Healthy(t0 + p + p / 2));
  // Stopped for 5 s: a request served as the loop comes back sees the overdue tick.
  CHECK(lag.Lag(t0 + 2 * p + 5s) == 5s);
  CHECK_FALSE(lag.Healthy(t0 + 2 * p + 5s));
  CHECK(lag.Healthy(t0 + 2 * p + LoopLag::kBound));  // the bound itself is still healthy
  lag.Ticked(t0 + 2 * p, t0 + 2 * p + 5s);           // the late tick itself
  CHECK(lag.Lag(t0 + 2 * p + 5s + 10ms) == 5s);
  lag.Ticked(t0 + 3 * p + 5s, t0 + 3 * p + 5s);  // the next, on time
  CHECK(lag.Healthy(t0 + 3 * p + 5s + 10ms));
}

TEST_CASE("Pages: /metrics in 0.0.4 text, /healthz by the loop's lag, /readyz by the workers", "[metrics]") {
  bool ready = false;
  MetricsPages pages{[](Exposition& e) { e.Add("dlaunch_ranks_running", 2); }, [&ready] { return ready; }};
  MetricsAnswer m = AnswerMetricsRequest("GET", "/metrics?x=1", pages, 10ms);
  CHECK(m.status == 200);
  CHECK(m.content_type == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(m.body.find("dlaunch_ranks_running 2\n") != std::string::npos);
  CHECK(m.body.find("# TYPE process_open_fds gauge\n") != std::string::npos);
  CHECK(m.body.find("dlaunch_event_loop_lag_seconds 0.01\n") != std::string::npos);
  CHECK(AnswerMetricsRequest("GET", "/healthz", pages, 2s).status == 200);
  MetricsAnswer sick = AnswerMetricsRequest("GET", "/healthz", pages, 2001ms);
  CHECK(sick.status == 503);
  CHECK(sick.body == "event loop behind by 2.0s (over 2s)\n");
  CHECK(AnswerMetricsRequest("GET", "/readyz", pages, 0ms).status == 503);
  ready = true;
  CHECK(AnswerMetricsRequest("HEAD", "/readyz", pages, 0ms).status == 200);
  CHECK(AnswerMetricsRequest("GET", "/", pages, 0ms).status == 404);
  CHECK(AnswerMetricsRequest("GET", "/metricsx", pages, 0ms).status == 404);
  MetricsAnswer post = AnswerMetricsRequest("POST", "/metrics", pages, 0ms);
  CHECK(post.status == 405);
  CHECK(post.allow == "GET, HEAD");
}

TEST_CASE("LauncherMetrics reads the live view's run and counts the parts' events; a scrape never asks for stacks",
          "[metrics]") {
  RunLiveSource live(LiveJob{"job\"7", "", {"python"}, 2});
  LauncherMetrics m("rendezvous", 0, live);
  CHECK_FALSE(m.Ready());
  Exposition before;
  m.Write(before);
  CHECK(before.Text().find("dlaunch_ranks_running 0\n") != std::string::npos);
  CHECK(before.Text().find("dlaunch_job_info{run_id=\"job\\\"7\",mode=\"rendezvous\"} 1\n") != std::string::npos);

  MetricsFakeRun run;
  run.rows = MetricsRows(R"j([{"rank": 2, "pid": 9, "state": "running", "silent_s": 0.5, "restarts": 1},
                             {"rank": 3, "pid": 10, "state": "stopped", "silent_s": 0.5, "restarts": 1}])j");
  live.SetRun(&run);
  CHECK(m.Ready());
  m.OnEvent("rendezvous", {{"generation", 2}, {"restart", 1}, {"world_size", 4}});
  m.OnEvent("hang_suspected", {{"silent_for_s", 3}});
  m.OnEvent("stacks", {{"file", "x"}});
  m.OnEvent("stacks", {{"file", "y"}});
  m.OnEvent("worker_started", {{"rank", 2}});
  Exposition e;
  run.asked = 0;
  m.Write(e);
  CHECK(run.asked == 1);  // one reading of the rows a scrape
  std::string text = e.Text();
  CHECK(text.find("dlaunch_ready 1\n") != std::string::npos);
  CHECK(text.find("dlaunch_world_size 4\n") != std::string::npos);
  CHECK(text.find("dlaunch_ranks_running 2\n") != std::string::npos);
  CHECK(text.find("dlaunch_restarts_total 1\n") != std::string::npos);
  CHECK(text.find("dlaunch_hangs_detected_total 1\n") != std::string::npos);
  CHECK(text.find("dlaunch_stacks_taken_total 2\n") != std::string::npos);
  CHECK(text.find("dlaunch_nodes_joined_total") == std::string::npos);  // not the host
  CHECK(text.find("dlaunch_health_check_failures_total 0\n") != std::string::npos);
  CHECK(text.find("dlaunch_node_held_out 0\n") != std::string::npos);
  // --health-check: each failure counts, and the node is held out until a check passes.
  m.OnEvent("health_check", {{"ok", false}, {"how", "exited with code 3"}});
  m.OnEvent("health_check", {{"ok", false}, {"how", "exited with code 3"}});
  Exposition held;
  m.Write(held);
  CHECK(held.Text().find("dlaunch_health_check_failures_total 2\n") != std::string::npos);
  CHECK(held.Text().find("dlaunch_node_held_out 1\n") != std::string::npos);
  m.OnEvent("health_check", {{"ok", true}, {"how", "passed"}});
  Exposition joined;
  m.Write(joined);
  CHECK(joined.Text().find("dlaunch_health_check_failures_total 2\n") != std::string::npos);
  CHECK(joined.Text().find("dlaunch_node_held_out 0\n") != std::string::npos);
  // Between generations: no run, not ready.
  live.SetRun(nullptr);
  CHECK_FALSE(m.Ready());
}

TEST_CASE("ReadSelfUsage reads this process", "[metrics]") {
  SelfUsage u = ReadSelfUsage();
  CHECK(u.rss_bytes > 0);
  CHECK(u.open_fds >= 3);
  CHECK(u.cpu_seconds >= 0);
  int fd = dup(0);
  CHECK(ReadSelfUsage().open_fds == u.open_fds + 1);
  close(fd);
}

}  // namespace dlaunch::launcher

namespace dlaunch::launcher {
namespace {

TEST_CASE("the straggler watch's events become each rank's sync share and the stragglers named", "[metrics]") {
  RunLiveSource live(LiveJob{"job", "", {"python"}, 2});
  LauncherMetrics m("local", 4, live);
  m.OnEvent("straggler_window", {{"window", 1}, {"sync_pct", {{"0", 40}, {"1", 5}, {"x", 1}}}});
  m.OnEvent("straggler", {{"state", "named"}, {"ranks", {1}}});
  Exposition named;
  m.Write(named);
  CHECK(named.Text().find("dlaunch_rank_sync_share{rank=\"0\"} 0.4\n") != std::string::npos);
  CHECK(named.Text().find("dlaunch_rank_sync_share{rank=\"1\"} 0.05\n") != std::string::npos);
  CHECK(named.Text().find("rank=\"x\"") == std::string::npos);
  CHECK(named.Text().find("dlaunch_stragglers 1\n") != std::string::npos);
  CHECK(named.Text().find("dlaunch_stragglers_named_total 1\n") != std::string::npos);
  m.OnEvent("straggler", {{"state", "cleared"}, {"ranks", {1}}});
  m.OnEvent("straggler_window", {{"window", 2}, {"sync_pct", {{"0", 30}}}});
  Exposition cleared;
  m.Write(cleared);
  CHECK(cleared.Text().find("dlaunch_stragglers 0\n") != std::string::npos);
  CHECK(cleared.Text().find("dlaunch_stragglers_named_total 1\n") != std::string::npos);
  CHECK(cleared.Text().find("dlaunch_rank_sync_share{rank=\"1\"}") ==
        std::string::npos);  // the last window's ranks only
}

}  // namespace
}  // namespace dlaunch::launcher
