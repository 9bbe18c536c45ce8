// The Open MPI bootstrap's line and the helper that prints it.
#include "launcher/modes/mpi_bootstrap.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

namespace dlaunch::launcher {
namespace {

TEST_CASE("the MPI bootstrap helper's line", "[surroundings]") {
  Result<MpiShared> ok = ParseMpiBootstrapLine("2 4 vm:41234\n");
  REQUIRE(ok.ok());
  CHECK(ok->rank == 2);
  CHECK(ok->size == 4);
  CHECK(ok->value == "vm:41234");
  for (const char* bad : {"", "2 4", "2 4 ", "x 4 h:1", "4 4 h:1", "-1 4 h:1", "0 0 h:1", "0 1x h:1"}) {
    INFO(bad);
    CHECK_FALSE(ParseMpiBootstrapLine(bad).ok());
  }
  CHECK(ParseMpiBootstrapLine("2 4").status().message() ==
        "dlaunch-mpi-bootstrap: expected 'RANK SIZE VALUE', got '2 4'");
  CHECK(MpiShareFromRankZero("/nonexistent/dlaunch-mpi-bootstrap", "h:1", std::chrono::seconds(1)).status().code() ==
        Code::kNotFound);
}

// A stand-in for dlaunch-mpi-bootstrap: a shell script in a fresh directory.
std::string FakeHelper(const std::string& body) {
  char dir[] = "/tmp/dlaunch-helper-test-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string path = std::string(dir) + "/dlaunch-mpi-bootstrap";
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  chmod(path.c_str(), 0700);
  return path;
}

void RemoveHelper(const std::string& path) {
  unlink(path.c_str());
  rmdir(path.substr(0, path.rfind('/')).c_str());
}

TEST_CASE("running the bootstrap helper: its line, its failure, its silence", "[surroundings]") {
  std::string echo = FakeHelper(R"(echo "1 2 $1")");
  Result<MpiShared> ok = MpiShareFromRankZero(echo, "vm:4242", std::chrono::seconds(10));
  INFO(ok.status().message());
  REQUIRE(ok.ok());
  CHECK(ok->rank == 1);
  CHECK(ok->size == 2);
  CHECK(ok->value == "vm:4242");
  RemoveHelper(echo);

  std::string failing = FakeHelper("exit 1");
  CHECK(MpiShareFromRankZero(failing, "vm:1", std::chrono::seconds(10)).status().message() ==
        failing + " exited with code 1");
  RemoveHelper(failing);

  std::string silent = FakeHelper("exec sleep 30");
  auto t0 = std::chrono::steady_clock::now();
  Result<MpiShared> late = MpiShareFromRankZero(silent, "vm:1", std::chrono::milliseconds(300));
  CHECK(late.status().code() == Code::kTimeout);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  RemoveHelper(silent);
}

}  // namespace
}  // namespace dlaunch::launcher
