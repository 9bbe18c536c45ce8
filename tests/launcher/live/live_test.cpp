#include "launcher/live/live.hpp"
#include "launcher/core/private_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <catch2/catch.hpp>

#include "tests/temp_dir.hpp"
#include <fmt/format.h>

namespace dlaunch::launcher {
namespace {

namespace fs = std::filesystem;

// Answers from fixed documents; a stacks request waits until Release().
class FakeSource : public LiveSource {
 public:
  void Status(std::function<void(boost::json::object)> reply) override {
    ++asked;
    reply({{"run_id", "job"}, {"rows", boost::json::array{}}, {"pad", std::string(pad, 'p')}});
  }
  size_t pad = 0;  // bytes of padding in the status reply
  void Stacks(std::function<void(boost::json::object)> reply) override { waiting = std::move(reply); }
  int asked = 0;
  std::function<void(boost::json::object)> waiting;
};

std::string Exchange(boost::asio::io_context& io, const std::string& path, const std::string& request) {
  boost::asio::local::stream_protocol::socket s(io);
  s.connect(path);
  boost::asio::write(s, boost::asio::buffer(request));
  std::string reply;
  boost::system::error_code ec;
  char buf[4096];
  while (true) {
    // Serve the loop until the server has answered (or closed).
    size_t n = 0;
    s.non_blocking(true);
    n = s.read_some(boost::asio::buffer(buf), ec);
    if (ec == boost::asio::error::would_block) {
      io.run_one_for(std::chrono::milliseconds(50));
      continue;
    }
    if (ec) break;
    reply.append(buf, n);
  }
  return reply;
}

}  // namespace

TEST_CASE("socket names: the run id made safe and cut to fit, then the pid", "[live][bounds]") {
  CHECK(LiveSocketName("/run/user/0/dlaunch", "job42", 77) == "job42.77.sock");
  CHECK(LiveSocketName("/d", "a/b c\n", 5) == "a_b_c_.5.sock");
  std::string dir = "/tmp/dlaunch-0";
  std::string name = LiveSocketName(dir, std::string(1024, 'j'), 1234567890);
  CHECK(dir.size() + 1 + name.size() <= 107);
  CHECK(LiveSocketPid(name) == 1234567890);
  CHECK(LiveSocketPid("job.v2.77.sock") == 77);
  CHECK_FALSE(LiveSocketPid("job.sock"));
  CHECK_FALSE(LiveSocketPid("job.7x.sock"));
  CHECK_FALSE(LiveSocketPid("job.99999999999.sock"));
  CHECK_FALSE(LiveSocketPid("job.0.sock"));
  CHECK_FALSE(LiveSocketPid("job.7.txt"));
  CHECK(LiveSocketPrefix("/d", "job") == "job.");
}

TEST_CASE("the per-user directory: XDG_RUNTIME_DIR when it is the user's, else /tmp/dlaunch-UID", "[live]") {
  testing::TempDir t;
  uid_t me = geteuid();
  CHECK(LiveDir({{"XDG_RUNTIME_DIR", t.path}}, me) == t.path + "/dlaunch");
  CHECK(LiveDir({}, me) == fmt::format("{}/dlaunch-{}", DefaultTempParent(), me));
  CHECK(LiveDir({{"XDG_RUNTIME_DIR", "relative"}}, me) == fmt::format("{}/dlaunch-{}", DefaultTempParent(), me));
  CHECK(LiveDir({{"XDG_RUNTIME_DIR", t.path + "/missing"}}, me) ==
        fmt::format("{}/dlaunch-{}", DefaultTempParent(), me));
  CHECK(LiveDir({{"XDG_RUNTIME_DIR", t.path}}, me + 1) == fmt::format("{}/dlaunch-{}", DefaultTempParent(), me + 1));
}

TEST_CASE("OpenLiveDir makes a 0700 directory and refuses an unsafe one", "[live][bounds]") {
  testing::TempDir t;
  uid_t me = geteuid();
  std::string d = t.path + "/dlaunch";
  REQUIRE(OpenLiveDir(d, me).ok());
  struct stat st {};
  REQUIRE(stat(d.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  CHECK(OpenLiveDir(d, me).ok());  // again: as it is
  CHECK(OpenLiveDir(d, me + 1).message() == fmt::format("{}: refused (owned by uid {}, not {})", d, me, me + 1));
  chmod(d.c_str(), 0777);
  CHECK(OpenLiveDir(d, me).message() == d + ": refused (mode 0777 lets other users in; 0700 expected)");
  chmod(d.c_str(), 0750);
  CHECK(OpenLiveDir(d, me).message() == d + ": refused (mode 0750 lets other users in; 0700 expected)");
  std::string link = t.path + "/link";
  REQUIRE(symlink(d.c_str(), link.c_str()) == 0);
  CHECK(OpenLiveDir(link, me).message() == link + ": refused (a symlink)");
  std::string file = t.path + "/file";
  fclose(fopen(file.c_str(), "w"));
  CHECK(OpenLiveDir(file, me).message() == file + ": refused (not a directory)");
  CHECK(CheckLiveDir(t.path + "/none", me).code() == Code::kNotFound);
  CHECK_FALSE(fs::exists(t.path + "/none"));
}

TEST_CASE("the server answers one line, refuses junk, and cleans up after itself", "[live]") {
  testing::TempDir t;
  boost::asio::io_context io;
  FakeSource source;
  std::string path = t.path + "/job.1.sock";
  {
    Result<std::unique_ptr<LiveServer>> server = LiveServer::Start(io, path, source, nullptr);
    REQUIRE(server.ok());
    struct stat st {};
    REQUIRE(stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    boost::json::value v = boost::json::parse(Exchange(io, path, "status\n"));
    CHECK(v.at("run_id") == "job");
    CHECK(source.asked == 1);
    CHECK(Exchange(io, path, "hello\n") == "{\"error\":\"unknown request (expected 'status' or 'stacks')\"}\n");
    CHECK(Exchange(io, path, std::string(200, 'x')).empty());  // past the cap: closed unanswered
    CHECK((*server)->clients() == 0);
  }
  CHECK_FALSE(fs::exists(path));  // removed with the server
  // A stacks reply that comes after the server has gone is dropped, not a crash.
  {
    Result<std::unique_ptr<LiveServer>> server = LiveServer::Start(io, path, source, nullptr);
    REQUIRE(server.ok());
    boost::asio::local::stream_protocol::socket s(io);
    s.connect(path);
    boost::asio::write(s, boost::asio::buffer(std::string("stacks\n")));
    while (!source.waiting) io.run_one_for(std::chrono::milliseconds(50));
    CHECK((*server)->clients() == 1);
  }
  source.waiting({{"stacks", boost::json::array{}}});
  io.poll();
}

TEST_CASE("a stale socket file of the same name is replaced, and the new server answers", "[live]") {
  // A dlaunch SIGKILLed with this pid left its socket file: the bind finds it
  // (EADDRINUSE), and only then is it removed (live.cpp binds first).
  testing::TempDir t;
  boost::asio::io_context io;
  FakeSource source;
  std::string path = t.path + "/job.7.sock";
  {
    boost::asio::local::stream_protocol::acceptor dead(io, boost::asio::local::stream_protocol::endpoint(path));
  }  // closed, its file left behind
  REQUIRE(fs::exists(path));
  Result<std::unique_ptr<LiveServer>> server = LiveServer::Start(io, path, source, nullptr);
  REQUIRE(server.ok());
  boost::json::value v = boost::json::parse(Exchange(io, path, "status\n"));
  CHECK(v.at("run_id") == "job");
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // A directory cannot be unlinked: the listen fails and says why.
  std::string taken = t.path + "/job.8.sock";
  fs::create_directory(taken);
  Result<std::unique_ptr<LiveServer>> refused = LiveServer::Start(io, taken, source, nullptr);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() == taken + ": cannot listen (Address already in use)");
}

TEST_CASE("the server drops a silent client, a slow reader, and more clients than it serves", "[live][bounds]") {
  using namespace std::chrono_literals;
  testing::TempDir t;
  boost::asio::io_context io;
  FakeSource source;
  std::string path = t.path + "/job.1.sock";
  LiveServerOptions o;
  o.max_clients = 2;
  o.request_timeout = 100ms;
  o.reply_timeout = 100ms;
  Result<std::unique_ptr<LiveServer>> server = LiveServer::Start(io, path, source, nullptr, o);
  REQUIRE(server.ok());
  // Serves until `done` holds, for at most 30 s: a loaded host is slow (building
  // the 8 MiB reply below took 3.2 s beside the suite), and only a fault waits that long.
  auto serve_until = [&io](auto done) {
    auto end = std::chrono::steady_clock::now() + 30s;
    while (!done() && std::chrono::steady_clock::now() < end) io.run_one_for(10ms);
    return done();
  };
  using Socket = boost::asio::local::stream_protocol::socket;
  Socket a(io), b(io), c(io);
  a.connect(path);
  b.connect(path);
  REQUIRE(serve_until([&] { return (*server)->clients() == 2; }));
  c.connect(path);
  // The refusal is written before the blocking read below, which would wait forever for it.
  REQUIRE(serve_until([&] { return c.available() > 0; }));
  std::string busy(64, '\0');
  boost::system::error_code ec;
  size_t n = boost::asio::read(c, boost::asio::buffer(busy), ec);
  CHECK(busy.substr(0, n) == R"({"error":"busy: 2 clients already"})");
  // a and b said nothing: dropped past the request timeout.
  CHECK(serve_until([&] { return (*server)->clients() == 0; }));
  // A reply far larger than the socket buffers, never read: dropped after the reply timeout.
  source.pad = size_t{8} << 20;
  Socket lazy(io);
  lazy.connect(path);
  boost::asio::write(lazy, boost::asio::buffer(std::string("status\n")));
  REQUIRE(serve_until([&] { return (*server)->clients() == 1; }));
  CHECK(serve_until([&] { return (*server)->clients() == 0; }));
}

TEST_CASE("a reader that keeps taking a long reply is served to its end, however long it takes", "[live][bounds]") {
  // What a `dlaunch stacks` of a rank with a 1 MB symbol met beside the suite:
  // the whole reply within reply_timeout, or cut, and the client read half a JSON.
  using namespace std::chrono_literals;
  testing::TempDir t;
  boost::asio::io_context io;
  FakeSource source;
  source.pad = size_t{2} << 20;
  std::string path = t.path + "/job.1.sock";
  LiveServerOptions o;
  o.reply_timeout = 1s;
  Result<std::unique_ptr<LiveServer>> server = LiveServer::Start(io, path, source, nullptr, o);
  REQUIRE(server.ok());
  boost::asio::local::stream_protocol::socket s(io);
  s.connect(path);
  boost::asio::write(s, boost::asio::buffer(std::string("status\n")));
  s.non_blocking(true);
  std::string reply;
  char buf[16384];
  auto start = std::chrono::steady_clock::now();
  boost::system::error_code ec;
  // 16 KiB every 25 ms at most: 2 MiB take more than 3 s, three reply timeouts.
  while (!ec && std::chrono::steady_clock::now() - start < 60s) {
    auto pause_end = std::chrono::steady_clock::now() + 25ms;
    while (std::chrono::steady_clock::now() < pause_end) io.run_one_for(5ms);
    size_t n = s.read_some(boost::asio::buffer(buf), ec);
    if (ec == boost::asio::error::would_block) ec = {};
    reply.append(buf, n);
  }
  CHECK(ec == boost::asio::error::eof);
  CHECK(std::chrono::steady_clock::now() - start > 3 * o.reply_timeout);
  REQUIRE(reply.size() > source.pad);
  CHECK(boost::json::parse(reply).at("run_id") == "job");
}

}  // namespace dlaunch::launcher
