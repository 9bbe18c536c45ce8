#include "launcher/process/worker_rows.hpp"

#include <signal.h>
#include <unistd.h>

#include <map>

#include <catch2/catch.hpp>

using namespace dlaunch::launcher;
using namespace std::chrono_literals;

namespace {

const Clock::time_point kStart = Clock::time_point{} + 1h;

// /proc as the test says it is: 100 ticks a second.
struct FakeProc {
  WorkerRows::UsageReader Reader() {
    return [this](int pid) { return usage.count(pid) != 0 ? usage.at(pid) : ProcUsage{}; };
  }
  std::map<int, ProcUsage> usage;
};

RankFacts Facts(const WorkerRecord* w, const LastLine* last = nullptr, bool held = false) {
  return RankFacts{3, 1, 2, "host-b", 4, w, last, held, "rollout"};
}

WorkerRecord RunningWorker(int pid) {
  WorkerRecord w;
  w.local_rank = 1;
  w.pid = pid;
  w.started = kStart;
  w.running = true;
  return w;
}

}  // namespace

TEST_CASE("a rank not started yet", "[worker_rows]") {
  FakeProc proc;
  WorkerRows rows(2, proc.Reader(), 100);
  boost::json::object r = rows.Row(1, Facts(nullptr), kStart);
  CHECK(r.at("rank") == 3);
  CHECK(r.at("local_rank") == 1);
  CHECK(r.at("node_rank") == 2);
  CHECK(r.at("host") == "host-b");
  CHECK(r.at("role") == "rollout");
  CHECK(r.at("restarts") == 4);
  CHECK(r.at("pid") == 0);
  CHECK(r.at("state") == "not started");
  CHECK(r.at("last_line") == "");
  CHECK(r.at("silent_s") == 0.0);
}

TEST_CASE("a running rank: /proc's state and memory, CPU % since the last reading", "[worker_rows]") {
  FakeProc proc;
  WorkerRows rows(2, proc.Reader(), 100);
  WorkerRecord w = RunningWorker(4242);
  proc.usage[4242] = {'S', 500, 2048};  // 5 s of CPU in its first 10 s
  boost::json::object r = rows.Row(1, Facts(&w), kStart + 10s);
  CHECK(r.at("pid") == 4242);
  CHECK(r.at("state") == "sleeping");
  CHECK(r.at("rss_kib") == 2048);
  CHECK(r.at("run_time_s") == 10.0);
  CHECK(r.at("cpu_pct") == 50.0);
  CHECK(r.at("silent_s") == 10.0);  // nothing written since it started
  // One more second at full speed: the share since the last reading.
  proc.usage[4242] = {'R', 600, 2048};
  r = rows.Row(1, Facts(&w), kStart + 11s);
  CHECK(r.at("state") == "running");
  CHECK(r.at("cpu_pct") == 100.0);
  // A reading less than 200 ms after the last one spans the whole life instead.
  proc.usage[4242] = {'R', 610, 2048};
  r = rows.Row(1, Facts(&w), kStart + 11s + 100ms);
  CHECK(r.at("cpu_pct") == 55.0);  // 6.1 s of CPU in 11.1 s
  // Gone from /proc before it is reaped.
  proc.usage.erase(4242);
  CHECK(rows.Row(1, Facts(&w), kStart + 12s).at("state") == "exiting");
}

TEST_CASE("the last line and the silence since it; held output is not silence", "[worker_rows]") {
  FakeProc proc;
  WorkerRows rows(2, proc.Reader(), 100);
  WorkerRecord w = RunningWorker(7);
  proc.usage[7] = {'R', 0, 0};
  LastLine last;
  last.Append("epoch 1\nepoch 2 \x1b[31mred", kStart + 4s);
  boost::json::object r = rows.Row(1, Facts(&w, &last), kStart + 10s);
  CHECK(r.at("silent_s") == 6.0);
  CHECK(r.at("last_line").as_string().starts_with("epoch 2"));
  r = rows.Row(1, Facts(&w, &last, true), kStart + 10s);
  CHECK(r.at("silent_s") == 0.0);
}

TEST_CASE("a running rank without /proc (the metrics' rows): running, its pid and silence, no usage", "[worker_rows]") {
  WorkerRows rows(
      2,
      [](int) -> ProcUsage {
        FAIL("/proc was read");
        return {};
      },
      100);
  WorkerRecord w = RunningWorker(4242);
  boost::json::object r = rows.Row(1, Facts(&w), kStart + 10s, false);
  CHECK(r.at("pid") == 4242);
  CHECK(r.at("state") == "running");
  CHECK(r.at("rss_kib") == 0);
  CHECK(r.at("cpu_pct") == 0.0);
  CHECK(r.at("silent_s") == 10.0);
  CHECK(r.at("restarts") == 4);
  CHECK_FALSE(r.contains("exit_code"));
}

TEST_CASE("an ended rank: its exit code or signal, its run time, no /proc", "[worker_rows]") {
  FakeProc proc;
  WorkerRows rows(
      1,
      [](int) -> ProcUsage {
        FAIL("an ended worker's /proc was read");
        return {};
      },
      100);
  WorkerRecord w = RunningWorker(9);
  w.running = false;
  w.ended = kStart + 2500ms;
  w.status = {3, 0};
  boost::json::object r = rows.Row(0, Facts(&w), kStart + 1h);
  CHECK(r.at("state") == "exited (3)");
  CHECK(r.at("run_time_s") == 2.5);
  CHECK(r.at("silent_s") == 2.5);
  CHECK(r.at("pid") == 0);
  CHECK(r.at("exit_code") == 3);
  w.status = {0, SIGKILL};
  r = rows.Row(0, Facts(&w), kStart + 1h);
  CHECK(r.at("state") == "killed (SIGKILL)");
  CHECK(r.at("exit_code") == 128 + SIGKILL);
}

TEST_CASE("ReadUsage reads this process from /proc", "[worker_rows]") {
  ProcUsage u = ReadUsage(getpid());
  CHECK(u.state == 'R');
  CHECK(u.rss_kib > 0);
  CHECK(ReadUsage(0).state == '\0');
}
