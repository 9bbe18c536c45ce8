#include "launcher/http/server.hpp"

#include <sys/resource.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>

namespace dlaunch::launcher::http {
namespace {

using namespace std::chrono_literals;
using boost::asio::ip::tcp;

// One client socket to the server, driven by hand: each wait serves the loop
// until something happens or a bound passes (the server's own timeouts are a few
// hundred milliseconds here; the bounds are far above them).
class Client {
 public:
  Client(boost::asio::io_context& io, const tcp::endpoint& to) : io_(io), socket_(io) {
    socket_.connect(to);
    socket_.non_blocking(true);
  }
  tcp::socket& socket() { return socket_; }
  void Send(const std::string& bytes) {
    socket_.non_blocking(false);
    boost::asio::write(socket_, boost::asio::buffer(bytes));
    socket_.non_blocking(true);
  }
  // Reads until `done(received)` holds, the server closes, or 5 s pass. True when closed.
  bool ReadUntil(const std::function<bool(const std::string&)>& done) {
    auto end = std::chrono::steady_clock::now() + 5s;
    char buf[4096];
    while (!done(received) && std::chrono::steady_clock::now() < end) {
      boost::system::error_code ec;
      size_t n = socket_.read_some(boost::asio::buffer(buf), ec);
      if (ec == boost::asio::error::would_block) {
        io_.run_one_for(10ms);
        continue;
      }
      if (ec) return true;
      received.append(buf, n);
    }
    return false;
  }
  bool ReadToClose() {
    return ReadUntil([](const std::string&) { return false; });
  }
  std::string received;

 private:
  boost::asio::io_context& io_;
  tcp::socket socket_;
};

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

struct Fixture {
  explicit Fixture(ServerOptions options = {}, Handler handler = nullptr) {
    if (!handler)
      handler = [this](const Request& r) {
        requests.push_back(r);
        if (r.target == "/missing") return Response{404, "no such key\n"};
        return Response{200, r.method + " " + r.target + " " + r.body};
      };
    auto started = Server::Start(
        io, tcp::endpoint(boost::asio::ip::address_v4::loopback(), 0), std::move(handler),
        [this](const std::string& line) { lines.push_back(line); }, std::move(options));
    REQUIRE(started.ok());
    server = std::move(started).value();
  }
  std::string Log() const {
    std::string all;
    for (const std::string& l : lines) all += l + "\n";
    return all;
  }
  void Serve(std::chrono::milliseconds d) {
    auto end = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < end) io.run_one_for(5ms);
  }
  // Serves until `done` holds, for at most `bound` (a loaded host is slow to
  // accept; only a fault waits that long); returns `done()`.
  template <typename Done>
  bool ServeUntil(Done done, std::chrono::milliseconds bound = 30000ms) {
    auto end = std::chrono::steady_clock::now() + bound;
    while (!done() && std::chrono::steady_clock::now() < end) io.run_one_for(5ms);
    return done();
  }
  boost::asio::io_context io;
  std::vector<Request> requests;
  std::vector<std::string> lines;
  std::unique_ptr<Server> server;
};

const std::string kGet = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
const std::string kGetClose = "GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

TEST_CASE("listen addresses: ADDR:PORT, [V6]:PORT, localhost or a port alone; the rest named", "[http]") {
  auto ok = [](const std::string& text) {
    auto r = ParseListenAddress(text);
    REQUIRE(r.ok());
    return FormatEndpoint(*r);
  };
  CHECK(ok("9100") == "127.0.0.1:9100");
  CHECK(ok("0") == "127.0.0.1:0");
  CHECK(ok("0.0.0.0:9100") == "0.0.0.0:9100");
  CHECK(ok("localhost:80") == "127.0.0.1:80");
  CHECK(ok("[::1]:9100") == "[::1]:9100");
  CHECK(ok("[::]:0") == "[::]:0");
  for (const char* bad : {"", ":", "host:", "9100x", "65536", "-1", "10.0.0.1:99999", "::1:9100", "[::1]9100",
                          "example.com:9100", "10.0.0.256:1", "18446744073709551617"}) {
    auto r = ParseListenAddress(bad);
    INFO(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(std::string("'") + bad + "'") != std::string::npos);
  }
}

TEST_CASE("a server answers on the port it chose, keeps a connection alive and closes it when asked", "[http]") {
  Fixture f;
  REQUIRE(f.server->endpoint().port() != 0);
  Client c(f.io, f.server->endpoint());
  c.Send(kGet);
  REQUIRE_FALSE(c.ReadUntil([](const std::string& r) { return r.find("GET /metrics ") != std::string::npos; }));
  CHECK(c.received.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(c.received.find("Content-Length: 13\r\n") != std::string::npos);
  c.Send("PUT /global/rank_0 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
  REQUIRE(c.ReadToClose());
  CHECK(c.received.find("PUT /global/rank_0 hello") != std::string::npos);
  REQUIRE(f.requests.size() == 2);
  CHECK(f.requests[1].peer_address == boost::asio::ip::address_v4::loopback());
  CHECK(f.requests[1].peer.rfind("127.0.0.1:", 0) == 0);
  CHECK(f.server->answered() == 2);
  CHECK(f.ServeUntil([&] { return f.server->clients() == 0; }));
  CHECK(f.lines.empty());
}

TEST_CASE("a second server on a bound port is refused with the address named", "[http]") {
  Fixture f;
  auto again = Server::Start(
      f.io, f.server->endpoint(), [](const Request&) { return Response{}; }, nullptr, ServerOptions{.name = "metrics"});
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().message().find("metrics: cannot listen on " + FormatEndpoint(f.server->endpoint())) !=
        std::string::npos);
}

TEST_CASE("oversized headers and bodies, and junk, get one answer, a close and a line", "[http][bounds]") {
  Fixture f(ServerOptions{.name = "store", .max_header = 512, .max_body = 64});
  SECTION("a header over the bound: 431") {
    Client c(f.io, f.server->endpoint());
    c.Send("GET / HTTP/1.1\r\nX-Pad: " + std::string(4096, 'a') + "\r\n\r\n");
    REQUIRE(c.ReadToClose());
    CHECK(c.received.rfind("HTTP/1.1 431 ", 0) == 0);
    CHECK(f.Log().find("refused 127.0.0.1:") != std::string::npos);
    CHECK(f.Log().find("(a header over 512 bytes)") != std::string::npos);
  }
  SECTION("a 1 MiB header, sent without waiting for the answer") {
    Client c(f.io, f.server->endpoint());
    std::string huge = "GET / HTTP/1.1\r\nX-Pad: " + std::string(1 << 20, 'a');
    boost::system::error_code ec;
    size_t sent = 0;
    // Writes what the socket takes; the server must close before all of it is read.
    for (int i = 0; i < 400 && sent < huge.size() && !ec; ++i) {
      size_t n = c.socket().write_some(boost::asio::buffer(huge.data() + sent, huge.size() - sent), ec);
      if (ec == boost::asio::error::would_block) ec.clear();
      sent += n;
      f.io.run_one_for(5ms);
    }
    c.ReadToClose();
    CHECK(f.Log().find("(a header over 512 bytes)") != std::string::npos);
    CHECK(f.server->clients() == 0);
  }
  SECTION("a body over the bound: 413, before the body is read") {
    Client c(f.io, f.server->endpoint());
    c.Send("PUT /global/k HTTP/1.1\r\nContent-Length: 100000\r\n\r\n" + std::string(100, 'v'));
    REQUIRE(c.ReadToClose());
    CHECK(c.received.rfind("HTTP/1.1 413 ", 0) == 0);
    CHECK(f.Log().find("(a body over 64 bytes)") != std::string::npos);
  }
  SECTION("junk: 400") {
    Client c(f.io, f.server->endpoint());
    // A TLS ClientHello's first bytes (NULs among them), then text.
    static const char kJunk[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http at all\r\n\r\n";
    c.Send(std::string(kJunk, sizeof kJunk - 1));
    REQUIRE(c.ReadToClose());
    CHECK(c.received.rfind("HTTP/1.1 400 ", 0) == 0);
    CHECK(f.Log().find("not an HTTP/1.1 request") != std::string::npos);
  }
  CHECK(f.requests.empty());
  CHECK(f.server->refused() == 1);
  // The server goes on answering.
  Client next(f.io, f.server->endpoint());
  next.Send(kGetClose);
  REQUIRE(next.ReadToClose());
  CHECK(next.received.rfind("HTTP/1.1 200 ", 0) == 0);
}

TEST_CASE("a slowloris is dropped when its request has not come whole in time", "[http][bounds]") {
  Fixture f(ServerOptions{.request_timeout = 200ms});
  Client slow(f.io, f.server->endpoint());
  slow.Send("GET /metrics HTTP/1.1\r\nHost: x\r\n");
  for (int i = 0; i < 100 && f.server->clients() == 0; ++i) f.Serve(10ms);
  REQUIRE(f.server->clients() == 1);
  auto start = std::chrono::steady_clock::now();
  // A byte now and then does not reset the bound.
  for (int i = 0; i < 10 && f.server->clients() > 0; ++i) {
    boost::system::error_code ec;
    slow.socket().write_some(boost::asio::buffer("X", 1), ec);
    f.Serve(50ms);
  }
  CHECK(f.server->clients() == 0);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  CHECK(f.Log().find("(no whole request within 200ms)") != std::string::npos);
  CHECK(f.requests.empty());
}

TEST_CASE("a kept-alive connection may idle past the request bound, and is closed quietly after the idle bound",
          "[http][bounds]") {
  Fixture f(ServerOptions{.request_timeout = 200ms, .idle_timeout = 1500ms});
  Client c(f.io, f.server->endpoint());
  c.Send(kGet);
  REQUIRE_FALSE(c.ReadUntil([](const std::string& r) { return Count(r, "GET /metrics ") == 1; }));
  // Three request bounds of silence between two scrapes: still open, still answered.
  f.Serve(600ms);
  REQUIRE(f.server->clients() == 1);
  c.Send(kGet);
  REQUIRE_FALSE(c.ReadUntil([](const std::string& r) { return Count(r, "GET /metrics ") == 2; }));
  // A request that begins after the idle wait still has only the request bound.
  c.Send("GET /metrics HTTP/1.1\r\n");
  auto start = std::chrono::steady_clock::now();
  CHECK(c.ReadToClose());
  CHECK(std::chrono::steady_clock::now() - start < 1s);
  // The server's own handler runs after the close the client saw.
  CHECK(f.ServeUntil([&] { return f.Log().find("(no whole request within 200ms)") != std::string::npos; }));
  CHECK(f.server->refused() == 1);
  // Idle past the idle bound: closed, with no line and no refusal.
  Client idle(f.io, f.server->endpoint());
  idle.Send(kGet);
  REQUIRE_FALSE(idle.ReadUntil([](const std::string& r) { return Count(r, "GET /metrics ") == 1; }));
  start = std::chrono::steady_clock::now();
  CHECK(idle.ReadToClose());
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(took >= 1400ms);
  CHECK(took < 4s);
  CHECK(f.ServeUntil([&] { return f.server->clients() == 0; }));
  CHECK(f.server->refused() == 1);
  CHECK(f.lines.size() == 1);
  CHECK(f.server->answered() == 3);
}

TEST_CASE("a full server evicts the longest-idle connection, or says busy when none has idled", "[http][bounds]") {
  SECTION("none idle long enough: the newcomer gets 503") {
    Fixture f(ServerOptions{.max_clients = 2, .evict_after = 60s});
    Client a(f.io, f.server->endpoint()), b(f.io, f.server->endpoint());
    REQUIRE(f.ServeUntil([&] { return f.server->clients() == 2; }));
    Client c(f.io, f.server->endpoint());
    REQUIRE(c.ReadToClose());
    CHECK(c.received.rfind("HTTP/1.1 503 ", 0) == 0);
    CHECK(c.received.find("busy: 2 clients already") != std::string::npos);
    CHECK(f.Log().find("(2 clients already)") != std::string::npos);
    CHECK(f.server->clients() == 2);
  }
  SECTION("2,000 idle connections cannot lock a client out") {
    // Two descriptors a connection while it lasts (the client's and the server's).
    rlimit fds{};
    getrlimit(RLIMIT_NOFILE, &fds);
    fds.rlim_cur = std::max<rlim_t>(fds.rlim_cur, std::min<rlim_t>(fds.rlim_max, 4400));
    setrlimit(RLIMIT_NOFILE, &fds);
    const int crowd = fds.rlim_cur >= 4400 ? 2000 : static_cast<int>(fds.rlim_cur / 2) - 100;
    Fixture f(ServerOptions{.max_clients = 8, .evict_after = 0ms});
    std::vector<std::unique_ptr<Client>> idle;
    for (int i = 0; i < crowd; ++i) {
      idle.push_back(std::make_unique<Client>(f.io, f.server->endpoint()));
      if (i % 50 == 0) f.Serve(1ms);
    }
    f.Serve(50ms);
    CHECK(f.server->clients() <= 8);
    Client probe(f.io, f.server->endpoint());
    probe.Send(kGetClose);
    REQUIRE(probe.ReadToClose());
    CHECK(probe.received.rfind("HTTP/1.1 200 ", 0) == 0);
    // The lines stay few: five of a kind, then a count.
    CHECK(Count(f.Log(), "closed 127.0.0.1:") <= 5);
  }
}

TEST_CASE("a peer the admit check refuses is closed unanswered, in one line", "[http][bounds]") {
  Fixture f(ServerOptions{.admit = [](const tcp::endpoint& ours, const tcp::endpoint& theirs) {
    CHECK(ours.port() != theirs.port());
    return theirs.address().is_loopback() ? std::string("not one of the job's nodes") : std::string();
  }});
  Client c(f.io, f.server->endpoint());
  c.Send(kGetClose);
  REQUIRE(c.ReadToClose());
  CHECK(c.received.empty());
  CHECK(f.requests.empty());
  CHECK(f.Log().find("refused 127.0.0.1:") != std::string::npos);
  CHECK(f.Log().find("(not one of the job's nodes)") != std::string::npos);
}

TEST_CASE("pipelined requests are answered in order, up to the bound for one connection", "[http][bounds]") {
  Fixture f(ServerOptions{.max_requests = 3});
  Client c(f.io, f.server->endpoint());
  std::string flood;
  for (int i = 0; i < 50; ++i) flood += "GET /r" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n";
  c.Send(flood);
  REQUIRE(c.ReadToClose());
  CHECK(Count(c.received, "HTTP/1.1 200 OK") == 3);
  CHECK(c.received.find("GET /r0 ") < c.received.find("GET /r1 "));
  CHECK(c.received.find("GET /r1 ") < c.received.find("GET /r2 "));
  CHECK(c.received.find("Connection: close") != std::string::npos);
  CHECK(f.requests.size() == 3);
}

TEST_CASE("a client that stops reading its answer is dropped after the reply bound", "[http][bounds]") {
  int seen = 0;
  Fixture f(ServerOptions{.reply_timeout = 200ms}, [&seen](const Request&) {
    ++seen;
    return Response{200, std::string(16 << 20, 'm')};
  });
  Client c(f.io, f.server->endpoint());
  int small = 4096;
  setsockopt(c.socket().native_handle(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  c.Send(kGet);
  for (int i = 0; i < 100 && seen == 0; ++i) f.Serve(10ms);
  REQUIRE(seen == 1);
  for (int i = 0; i < 100 && f.server->clients() > 0; ++i) f.Serve(20ms);
  CHECK(f.server->clients() == 0);
  CHECK(f.Log().find("(did not take its answer within 200ms)") != std::string::npos);
}

// Writes what the kernel takes of `bytes` from `at` without waiting; returns the new position.
size_t SendSome(tcp::socket& socket, const std::string& bytes, size_t at) {
  boost::system::error_code ec;
  while (at < bytes.size()) {
    size_t n = socket.write_some(boost::asio::buffer(bytes.data() + at, bytes.size() - at), ec);
    if (ec) break;  // would block (or the server closed it)
    at += n;
  }
  return at;
}

std::string Pipeline(int n) {
  std::string flood;
  for (int i = 0; i < n; ++i) flood += "GET /r" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n";
  return flood;
}

TEST_CASE("a client that pipelines requests and reads nothing stops being read; others are served",
          "[http][bounds][backpressure]") {
  // Answers of 1 KiB: without the bound on unsent answers the kernel took
  // thousands of them (up to a 4 MiB send buffer) for a client that read none.
  Fixture f(ServerOptions{.max_requests = 1000000, .reply_timeout = 500ms}, [](const Request&) {
    return Response{200, std::string(1024, 'a')};
  });
  tcp::socket c(f.io);
  c.open(tcp::v4());
  int small = 4096;  // before connecting, so that the window it offers is small from the start
  setsockopt(c.native_handle(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  c.connect(f.server->endpoint());
  c.non_blocking(true);
  const std::string flood = Pipeline(300000);  // 10 MB of requests
  size_t sent = 0;
  // The server stops reading, then drops the client for not taking its answers.
  REQUIRE(f.ServeUntil([&] {
    sent = SendSome(c, flood, sent);
    return f.Log().find("did not take its answer") != std::string::npos;
  }));
  INFO("answered " << f.server->answered() << ", client sent " << sent << " of " << flood.size() << " bytes");
  // Bounded: the client's small receive window and 16 KiB unsent make about 20
  // answers of 1 KiB (the kernel took some 2,500 before the bound).
  CHECK(f.server->answered() <= 64);
  // The requests the server did not read throttled the client: they wait in
  // the buffers, and it could not send them all.
  CHECK(sent < flood.size());

  // Meanwhile and afterwards another client is served.
  Client other(f.io, f.server->endpoint());
  other.Send(kGetClose);
  REQUIRE(other.ReadToClose());
  CHECK(other.received.rfind("HTTP/1.1 200 ", 0) == 0);
}

TEST_CASE("a slow client that reads gets every answer of a long pipeline", "[http][bounds][backpressure]") {
  Fixture f(ServerOptions{.max_requests = 1000000}, [](const Request& r) {
    return Response{200, r.target + std::string(1024, '.')};
  });
  Client c(f.io, f.server->endpoint());
  const int n = 3000;
  const std::string flood = Pipeline(n);
  size_t sent = 0;
  std::string got;
  char buf[2048];  // a little at a time
  REQUIRE(f.ServeUntil(
      [&] {
        sent = SendSome(c.socket(), flood, sent);
        boost::system::error_code ec;
        size_t k = c.socket().read_some(boost::asio::buffer(buf), ec);
        if (!ec) got.append(buf, k);
        return Count(got, "HTTP/1.1 200 OK") == n && got.find("/r" + std::to_string(n - 1) + ".") != std::string::npos;
      },
      60000ms));
  CHECK(f.server->answered() == n);
  CHECK(got.find("/r0.") < got.find("/r1."));
}

TEST_CASE("a handler that throws answers 500; HEAD gets the length without the body", "[http]") {
  Fixture f({}, [](const Request& r) -> Response {
    if (r.target == "/boom") throw std::runtime_error("no such metric");
    if (r.method == "POST") return Response{405, "GET or HEAD\n", "text/plain; charset=utf-8", "GET, HEAD"};
    return Response{200, "body!"};
  });
  Client c(f.io, f.server->endpoint());
  c.Send("GET /boom HTTP/1.1\r\n\r\nHEAD /x HTTP/1.1\r\n\r\nPOST /x HTTP/1.1\r\nConnection: close\r\n\r\n");
  REQUIRE(c.ReadToClose());
  CHECK(c.received.rfind("HTTP/1.1 500 ", 0) == 0);
  CHECK(c.received.find("internal error: no such metric") != std::string::npos);
  CHECK(c.received.find("Content-Length: 5\r\n") != std::string::npos);
  CHECK(c.received.find("body!") == std::string::npos);
  CHECK(Count(c.received, "Allow: ") == 1);
  CHECK(c.received.find("HTTP/1.1 405 Method Not Allowed\r\n") != std::string::npos);
  CHECK(c.received.find("Allow: GET, HEAD\r\n") > c.received.find("HTTP/1.1 405 "));
}

TEST_CASE("destroying a server with connections mid-request closes them", "[http]") {
  auto f = std::make_unique<Fixture>();
  Client a(f->io, f->server->endpoint()), b(f->io, f->server->endpoint());
  a.Send("GET /half HTTP/1.1\r\n");
  REQUIRE(f->ServeUntil([&] { return f->server->clients() == 2; }));
  f->server.reset();
  f->Serve(20ms);  // the queued handlers run and see the token
  CHECK(a.ReadToClose());
  CHECK(b.ReadToClose());
}

}  // namespace
}  // namespace dlaunch::launcher::http
