#include "launcher/process/summary.hpp"

#include <csignal>

#include <catch2/catch.hpp>

using namespace dlaunch::launcher;
using namespace std::chrono_literals;

TEST_CASE("error file message in torch's @record format", "[summary]") {
  CHECK(*ErrorFileMessage(R"({"message": {"message": "RuntimeError: boom", "extraInfo": {"py_callstack": "x"}}})") ==
        "RuntimeError: boom");
  CHECK(*ErrorFileMessage(R"({"message": "plain"})") == "plain");
  CHECK_FALSE(ErrorFileMessage("not json").has_value());
  CHECK_FALSE(ErrorFileMessage(R"({"other": 1})").has_value());
}

TEST_CASE("the summary names the root cause with its message, then the others", "[summary]") {
  Clock::time_point t0{};
  WorkerReport cause;
  cause.rank = 5;
  cause.record.local_rank = 1;
  cause.record.pid = 4242;
  cause.record.started = t0;
  cause.record.ended = t0 + 1500ms;
  cause.record.status = {3, 0};
  cause.stderr_tail = {"Traceback (most recent call last):", "ValueError: bad"};
  WorkerReport other;
  other.rank = 4;
  other.record.local_rank = 0;
  other.record.pid = 4241;
  other.record.status = {0, SIGTERM};
  auto lines = FailureSummary(3, &cause, {other, cause}, 0);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == "job failed with exit code 3");
  CHECK(lines[1] == "root cause: rank 5 (local_rank 1, pid 4242) exited with code 3 after 1.50s");
  CHECK(lines[2] == "  | Traceback (most recent call last):");
  CHECK(lines[3] == "  | ValueError: bad");
  CHECK(lines[4] == "others: rank 4 was killed by SIGTERM");

  cause.error_message = "RuntimeError: from the error file";
  lines = FailureSummary(3, &cause, {cause}, 0);
  REQUIRE(lines.size() == 3);
  CHECK(lines[2] == "  | RuntimeError: from the error file");
}

TEST_CASE("a job stopped by a signal says so", "[summary]") {
  auto lines = FailureSummary(143, nullptr, {}, SIGTERM);
  CHECK(lines == std::vector<std::string>{"stopped by SIGTERM; exit code 143"});
}
