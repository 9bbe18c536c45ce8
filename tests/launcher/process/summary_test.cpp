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

TEST_CASE("a root cause killed by a signal, directly or under a shell, names the signal", "[summary][signals]") {
  WorkerReport cause;
  cause.rank = 3;
  cause.record.local_rank = 1;
  cause.record.pid = 99;
  cause.record.status = {0, SIGSEGV};
  auto lines = FailureSummary(139, &cause, {cause}, 0);
  REQUIRE(lines.size() >= 2);
  CHECK(lines[1] == "root cause: rank 3 (local_rank 1, pid 99) was killed by SIGSEGV after 0.00s");
  // `bash -c 'python train.py; ...'`: the shell exits 128+9 when the kernel's
  // OOM killer took python.
  cause.record.status = {137, 0};
  lines = FailureSummary(137, &cause, {cause}, 0);
  CHECK(lines[1] == "root cause: rank 3 (local_rank 1, pid 99) exited with code 137 (128+SIGKILL) after 0.00s");
  cause.record.status = {0, SIGPROF};
  CHECK(FailureSummary(155, &cause, {cause}, 0)[1] ==
        "root cause: rank 3 (local_rank 1, pid 99) was killed by SIGPROF after 0.00s");
  // Codes that are no signal stay plain.
  CHECK(Describe({3, 0}) == "exited with code 3");
  CHECK(Describe({128, 0}) == "exited with code 128");
  CHECK(Describe({255, 0}) == "exited with code 255");
}

TEST_CASE("a job stopped by a signal says so", "[summary]") {
  auto lines = FailureSummary(143, nullptr, {}, SIGTERM);
  CHECK(lines == std::vector<std::string>{"stopped by SIGTERM; exit code 143"});
}

TEST_CASE("a node's end: the hang that stopped it, a failure, or nothing; the kill stacks always", "[summary]") {
  WorkerReport cause;
  cause.rank = 2;
  cause.record.local_rank = 0;
  cause.record.pid = 77;
  cause.record.status = {3, 0};
  NodeEnd end;
  end.exit_code = 124;
  end.hang_cause = {"root cause: no rank made progress for 9s (--hang-action stop)", "  | rank 0: in allreduce"};
  end.kill_stacks = {"at SIGKILL: full stacks in /run/stacks-1.txt"};
  CHECK(NodeEndLines(end) == std::vector<std::string>{"job stopped after a hang; exit code 124",
                                                      "root cause: no rank made progress for 9s (--hang-action stop)",
                                                      "  | rank 0: in allreduce",
                                                      "at SIGKILL: full stacks in /run/stacks-1.txt"});
  // A stop signal outranks the hang.
  end.stop_signal = SIGINT;
  end.exit_code = 130;
  CHECK(NodeEndLines(end).front() == "stopped by SIGINT; exit code 130");

  NodeEnd failed;
  failed.exit_code = 3;
  failed.cause = cause;
  failed.workers = {cause};
  CHECK(NodeEndLines(failed).at(1) == "root cause: rank 2 (local_rank 0, pid 77) exited with code 3 after 0.00s");
  // Ended from elsewhere (no root cause here, no signal): nothing to say.
  NodeEnd aborted;
  aborted.exit_code = 1;
  CHECK(NodeEndLines(aborted).empty());
  NodeEnd fine;
  CHECK(NodeEndLines(fine).empty());
}

TEST_CASE("a rank's own 124 reported as 1: the summary says why", "[summary][exit]") {
  WorkerReport cause;
  cause.rank = 0;
  cause.record.pid = 7;
  cause.record.status = {124, 0};
  auto lines = FailureSummary(1, &cause, {cause}, 0);
  REQUIRE(lines.size() >= 3);
  CHECK(lines[0] == "job failed with exit code 1");
  CHECK(lines[1] == "rank 0 exited with code 124, reported as 1: 124 is dlaunch's code for a hang");
  CHECK(lines[2] == "root cause: rank 0 (local_rank 0, pid 7) exited with code 124 after 0.00s");
  // dlaunch's own 123 after a last failure of code 124: the 123 is dlaunch's, no note.
  lines = FailureSummary(123, &cause, {cause}, 0);
  CHECK(lines[0] == "job failed with exit code 123");
  CHECK(lines[1].rfind("root cause: ", 0) == 0);
  // Any other code: no note.
  cause.record.status = {3, 0};
  CHECK(FailureSummary(3, &cause, {cause}, 0)[1].rfind("root cause: ", 0) == 0);
}
