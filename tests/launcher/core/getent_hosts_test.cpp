#include "launcher/core/getent_hosts.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <string>

#include <catch2/catch.hpp>

#include "tests/temp_dir.hpp"

namespace dlaunch::launcher {
namespace {

// A stand-in getent: a shell script printing `text` and exiting `code`.
std::string FakeGetent(const testing::TempDir& dir, const std::string& name, const std::string& body) {
  std::string path = dir / name;
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  REQUIRE(chmod(path.c_str(), 0755) == 0);
  return path;
}

}  // namespace

TEST_CASE("getent: the addresses of `getent ahosts` output, each once, in order", "[getent]") {
  CHECK(ParseGetentAhosts("10.0.0.5      STREAM node-3\n10.0.0.5      DGRAM  \n10.0.0.5      RAW    \n"
                          "fe80::1       STREAM node-3\n") == std::vector<std::string>{"10.0.0.5", "fe80::1"});
  CHECK(ParseGetentAhosts("127.0.1.1\tSTREAM x\r\n") == std::vector<std::string>{"127.0.1.1"});
  // Junk, names, half addresses and empty lines are skipped; a last line needs no newline.
  CHECK(ParseGetentAhosts("\n   \nnode-3 STREAM\n10.0.0 STREAM\n999.1.1.1 RAW\n::ffff:10.1.2.3 STREAM") ==
        std::vector<std::string>{"::ffff:10.1.2.3"});
  CHECK(ParseGetentAhosts("").empty());
  CHECK(std::string(GetentDatabase(AF_INET)) == "ahostsv4");
  CHECK(std::string(GetentDatabase(AF_INET6)) == "ahostsv6");
  CHECK(std::string(GetentDatabase(AF_UNSPEC)) == "ahosts");
}

TEST_CASE("getent: runs the program with the database and the name, and reads what it prints", "[getent]") {
  testing::TempDir dir;
  // It says back its arguments as an address line, so the test sees them.
  std::string args =
      FakeGetent(dir, "args", "echo \"10.9.8.7 STREAM $1 $2\"; echo \"# $1 $2\" >\"$(dirname \"$0\")/seen\"");
  Result<std::vector<std::string>> got = GetentAhosts(args, "node-7", AF_INET);
  REQUIRE(got.ok());
  CHECK(*got == std::vector<std::string>{"10.9.8.7"});
  std::ifstream seen(dir / "seen");
  std::string line;
  std::getline(seen, line);
  CHECK(line == "# ahostsv4 node-7");

  // getent's answer for a name it does not know: nothing printed, exit 2.
  Result<std::vector<std::string>> unknown = GetentAhosts(FakeGetent(dir, "unknown", "exit 2"), "nope", AF_UNSPEC);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().code() == Code::kNotFound);
  // Output that holds no address is no answer either.
  CHECK_FALSE(GetentAhosts(FakeGetent(dir, "junk", "echo garbage; echo more"), "x", AF_UNSPEC).ok());
  // A program that cannot be run says so.
  Result<std::vector<std::string>> missing = GetentAhosts(dir / "no-such-getent", "x", AF_UNSPEC);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("cannot run") != std::string::npos);
  // Endless output: read up to the limit, then getent gets EPIPE; no hang.
  Result<std::vector<std::string>> endless =
      GetentAhosts(FakeGetent(dir, "endless", "yes '10.0.0.1 STREAM x'"), "x", AF_UNSPEC);
  REQUIRE(endless.ok());
  CHECK(*endless == std::vector<std::string>{"10.0.0.1"});
  // No child is left behind.
  CHECK(waitpid(-1, nullptr, WNOHANG) <= 0);
}

TEST_CASE("getent: answers are kept for a while, unknown names too, and a bounded number of them", "[getent]") {
  using namespace std::chrono_literals;
  std::map<std::string, int> runs;
  GetentCache cache(
      [&runs](const std::string& name, int family) -> Result<std::vector<std::string>> {
        ++runs[name + "/" + std::to_string(family)];
        if (name == "unknown") return Status::NotFound("no address");
        return std::vector<std::string>{"10.0.0." + std::to_string(runs.size())};
      },
      5s);
  GetentCache::Clock::time_point t0{};
  Result<std::vector<std::string>> a = cache.Lookup("node", AF_INET, t0);
  REQUIRE(a.ok());
  // Asked again within the time: the same answer, getent not run again.
  for (auto dt : {1s, 4s}) {
    Result<std::vector<std::string>> again = cache.Lookup("node", AF_INET, t0 + dt);
    REQUIRE(again.ok());
    CHECK(*again == *a);
  }
  CHECK(runs["node/2"] == 1);
  // Another family is another question.
  REQUIRE(cache.Lookup("node", AF_INET6, t0).ok());
  CHECK(runs["node/10"] == 1);
  // An unknown name is kept as unknown.
  CHECK_FALSE(cache.Lookup("unknown", AF_UNSPEC, t0).ok());
  CHECK_FALSE(cache.Lookup("unknown", AF_UNSPEC, t0 + 2s).ok());
  CHECK(runs["unknown/0"] == 1);
  // Once the time is past, asked anew.
  REQUIRE(cache.Lookup("node", AF_INET, t0 + 5s).ok());
  CHECK(runs["node/2"] == 2);
  // Many names: at most kMaxEntries kept, the oldest going first.
  for (size_t i = 0; i < GetentCache::kMaxEntries + 10; ++i)
    cache.Lookup("n" + std::to_string(i), AF_INET, t0 + 10s + std::chrono::milliseconds(i));
  cache.Lookup("n0", AF_INET, t0 + 11s);  // the oldest was dropped: run again
  CHECK(runs["n0/2"] == 2);
  std::string newest = "n" + std::to_string(GetentCache::kMaxEntries + 9);
  cache.Lookup(newest, AF_INET, t0 + 11s);
  CHECK(runs[newest + "/2"] == 1);
}

TEST_CASE("getent: the system's own, for a name /etc/hosts knows", "[getent]") {
  std::string getent = FindGetent();
  REQUIRE_FALSE(getent.empty());  // glibc's libc-bin: on every machine dlaunch is built on
  Result<std::vector<std::string>> got = GetentAhosts(getent, "localhost", AF_INET);
  REQUIRE(got.ok());
  CHECK(std::find(got->begin(), got->end(), "127.0.0.1") != got->end());
}

}  // namespace dlaunch::launcher
