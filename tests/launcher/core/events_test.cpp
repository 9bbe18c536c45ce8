#include "launcher/core/events.hpp"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <catch2/catch.hpp>

#include "tests/temp_dir.hpp"

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;

using dlaunch::testing::ReadFile;

}  // namespace

TEST_CASE("EventLog writes valid UTF-8 whatever bytes a run id, an argument or a host holds", "[events]") {
  testing::TempDir t;
  std::string path = t.path + "/events.jsonl";
  {
    EventLog log;
    REQUIRE(log.Open(path).ok());
    log.SetRunId("job\xff");
    log.Emit("job_started", {{"command", boost::json::array{"train.py", "--name=caf\xc3\xa9", "\xc0\xaf\x1b[2J"}},
                             {"host", "node\xe2\x9c"}});
  }
  std::string text = ReadFile(path);
  REQUIRE(text.ends_with("\n"));
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);  // a strict parser: invalid UTF-8 is an error
  REQUIRE_FALSE(ec);
  const std::string r = "\xef\xbf\xbd";
  CHECK(v.at("run_id").as_string() == "job" + r);
  CHECK(v.at("command").at(1).as_string() == "--name=caf\xc3\xa9");
  CHECK(v.at("command").at(2).as_string() == r + r + "\x1b[2J");  // the control character JSON-escaped, kept
  CHECK(v.at("host").as_string() == "node" + r + r);
  CHECK(text.find("\\u001b[2J") != std::string::npos);
}

TEST_CASE("EventLog follows a symbolic link only when it is this user's or root's", "[events]") {
  testing::TempDir t;
  std::string target = t.path + "/precious";
  std::ofstream(target) << "precious\n";
  std::string link = t.path + "/events.jsonl";
  REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
  {
    EventLog own;  // ours: followed, as /dev/stdout (root's) is
    REQUIRE(own.Open(link).ok());
    own.Emit("job_started");
  }
  CHECK(ReadFile(target).starts_with("precious\n{\"event\":\"job_started\""));
  if (geteuid() != 0) return;  // only root can give a link to another user
  REQUIRE(lchown(link.c_str(), 65534, 65534) == 0);
  EventLog theirs;
  Status s = theirs.Open(link);
  CHECK(s.message() ==
        "--events " + link + ": refused (a symbolic link owned by uid 65534; only yours or root's are followed)");
  CHECK_FALSE(theirs.enabled());
}

TEST_CASE("EventLog::Check refuses what Open would, and opens and makes nothing", "[events]") {
  testing::TempDir t;
  // Each: the path, and the line both Check and Open give.
  std::ofstream(t / "there") << "kept\n";
  REQUIRE(mkdir((t / "dir").c_str(), 0700) == 0);
  const std::pair<std::string, std::string> kRefused[] = {
      {"/proc/dlaunch-test.jsonl",
       "--events /proc/dlaunch-test.jsonl: cannot open (/proc is a proc file system, where no files can be made)"},
      {t / "missing/e.jsonl", "--events " + t / "missing/e.jsonl" + ": cannot open (No such file or directory)"},
      {t / "there/e.jsonl", "--events " + t / "there/e.jsonl" + ": cannot open (Not a directory)"},
      {t / "dir", "--events " + t / "dir" + ": not a file, a FIFO or a device"},
  };
  for (const auto& [path, line] : kRefused) {
    INFO(path);
    CHECK(EventLog::Check(path).message() == line);
    EventLog log;
    CHECK(log.Open(path).message() == line);
  }
  CHECK(EventLog::Check(t / "new.jsonl").ok());
  CHECK_FALSE(fs::exists(t / "new.jsonl"));
  CHECK(EventLog::Check(t / "there").ok());
  CHECK(ReadFile(t / "there") == "kept\n");
  CHECK(EventLog::Check("/dev/null").ok());
  if (geteuid() != 0) return;  // only root can give a link to another user
  REQUIRE(symlink((t / "there").c_str(), (t / "link").c_str()) == 0);
  REQUIRE(lchown((t / "link").c_str(), 65534, 65534) == 0);
  CHECK(EventLog::Check(t / "link").message() ==
        "--events " + t / "link" + ": refused (a symbolic link owned by uid 65534; only yours or root's are followed)");
}

}  // namespace dlaunch::launcher
