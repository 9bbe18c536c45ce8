#include "launcher/http/server.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <exception>
#include <optional>
#include <sstream>
#include <utility>

#include <boost/asio/ip/address.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <fmt/core.h>

#include "launcher/core/text.hpp"

namespace dlaunch::launcher::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// What the wait for a kept-alive connection's next request reads at most; the
// parser reads the rest of the request behind it.
constexpr size_t kFirstRead = 512;

std::string Seconds(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? fmt::format("{}s", d.count() / 1000) : fmt::format("{}ms", d.count());
}

std::optional<uint16_t> ParsePort(std::string_view text) {
  unsigned port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || port > 65535) return std::nullopt;
  return static_cast<uint16_t>(port);
}

// A whole message with a short body, as bytes: for the answers written once,
// without waiting, to a connection that is being closed.
std::string Serialize(bhttp::status status, const std::string& body) {
  bhttp::response<bhttp::string_body> r{status, 11};
  r.set(bhttp::field::content_type, "text/plain; charset=utf-8");
  r.keep_alive(false);
  r.body() = body;
  r.prepare_payload();
  std::ostringstream out;
  out << r;
  return out.str();
}

}  // namespace

Result<tcp::endpoint> ParseListenAddress(const std::string& text) {
  auto bad = [&text](const std::string& why) {
    return Status::InvalidArgument(fmt::format("'{}': {}", SafeUtf8(text, false), why));
  };
  std::string host = "127.0.0.1";
  std::string_view port_text = text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find("]:");
    if (close == std::string::npos) return bad("an IPv6 address is written [ADDR]:PORT");
    host = text.substr(1, close - 1);
    port_text = std::string_view(text).substr(close + 2);
  } else if (size_t colon = text.rfind(':'); colon != std::string::npos) {
    host = text.substr(0, colon);
    port_text = std::string_view(text).substr(colon + 1);
    if (host.find(':') != std::string::npos) return bad("an IPv6 address is written [ADDR]:PORT");
    if (host == "localhost") host = "127.0.0.1";
  }
  std::optional<uint16_t> port = ParsePort(port_text);
  if (!port) return bad("expected ADDR:PORT or PORT, with a port from 0 to 65535");
  boost::system::error_code ec;
  asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec)
    return bad(fmt::format("'{}' is not an IP address (give one, or localhost; names are not looked up)",
                           SafeUtf8(host, false)));
  return tcp::endpoint(address, *port);
}

std::string FormatEndpoint(const tcp::endpoint& endpoint) {
  const asio::ip::address& a = endpoint.address();
  return a.is_v6() ? fmt::format("[{}]:{}", a.to_string(), endpoint.port())
                   : fmt::format("{}:{}", a.to_string(), endpoint.port());
}

struct Server::Conn {
  Conn(tcp::socket socket, size_t buffer_limit) : stream(std::move(socket)), buffer(buffer_limit) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;  // capped: pipelined bytes beyond one whole request wait in the socket
  std::optional<bhttp::request_parser<bhttp::string_body>> parser;
  bhttp::response<bhttp::string_body> response;
  std::string peer;
  asio::ip::address peer_address;
  bool reading = false;  // waiting for a request (and since when)
  Clock::time_point waiting_since;
  size_t served = 0;

  void Close() {
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.close();
  }
};

Server::Server(asio::io_context& io, Handler handler, std::function<void(const std::string&)> log,
               ServerOptions options)
    : io_(io),
      handler_(std::move(handler)),
      options_(std::move(options)),
      acceptor_(io),
      accept_retry_(io, [this](const std::string& what) { Refuse("accept", subject_ + ": " + what); }),
      tick_timer_(io),
      log_([log = std::move(log)](const std::string& line) {
        if (log) log(line);
      }) {}

Result<std::unique_ptr<Server>> Server::Start(asio::io_context& io, const tcp::endpoint& where, Handler handler,
                                              std::function<void(const std::string&)> log, ServerOptions options) {
  std::unique_ptr<Server> server(new Server(io, std::move(handler), std::move(log), std::move(options)));
  boost::system::error_code ec;
  server->acceptor_.open(where.protocol(), ec);
  if (!ec) server->acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) server->acceptor_.bind(where, ec);
  if (!ec) server->acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) server->endpoint_ = server->acceptor_.local_endpoint(ec);
  if (ec)
    return Status::Io(
        fmt::format("{}: cannot listen on {} ({})", server->options_.name, FormatEndpoint(where), ec.message()));
  server->subject_ = fmt::format("{} on {}", server->options_.name, FormatEndpoint(server->endpoint_));
  server->Accept();
  return server;
}

Server::~Server() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  for (auto& [id, conn] : conns_) conn->Close();
  conns_.clear();  // queued handlers hold theirs until they run, and see the token
}

void Server::Accept() {
  acceptor_.async_accept([this, alive = life_.token()](boost::system::error_code ec, tcp::socket socket) {
    if (alive.expired()) return;
    if (ec) return accept_retry_.Failed(ec, [this] { Accept(); });
    accept_retry_.Accepted();
    Admit(std::move(socket));
    Accept();
  });
}

void Server::Admit(tcp::socket socket) {
  boost::system::error_code ec;
  tcp::endpoint remote = socket.remote_endpoint(ec);
  tcp::endpoint local;
  if (!ec) local = socket.local_endpoint(ec);
  if (ec) return;  // gone already
  std::string peer = FormatEndpoint(remote);
  if (options_.admit) {
    if (std::string why = options_.admit(local, remote); !why.empty()) {
      ++refused_;
      return Refuse("peer", fmt::format("{}: refused {} ({})", subject_, peer, why));
    }
  }
  if (conns_.size() >= options_.max_clients && !MakeRoom()) {
    // One answer, written without waiting: a client that does not read it loses it.
    ++refused_;
    std::string busy =
        Serialize(bhttp::status::service_unavailable, fmt::format("busy: {} clients already\n", options_.max_clients));
    socket.non_blocking(true, ec);
    socket.write_some(asio::buffer(busy), ec);
    return Refuse("busy", fmt::format("{}: refused {} ({} clients already)", subject_, peer, options_.max_clients));
  }
  // Answers are taken by the kernel only while less than max_unsent of them is
  // unsent; a write that would go over waits, and with it the reading of the
  // next request (Serve reads again once its answer is written). Without this
  // the send buffer grows to tcp_wmem's maximum (4 MiB) for a client that
  // pipelines requests and reads nothing. In-flight bytes (sent, unacknowledged)
  // are bounded by the client's own receive window.
  const int unsent = static_cast<int>(std::min<size_t>(options_.max_unsent, 1 << 30));
  setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &unsent, sizeof unsent);
  uint64_t id = next_id_++;
  auto conn = std::make_shared<Conn>(std::move(socket), options_.max_header + options_.max_body + 1024);
  conn->peer = std::move(peer);
  conn->peer_address = remote.address();
  conns_[id] = std::move(conn);
  Read(id);
}

bool Server::MakeRoom() {
  Clock::time_point now = Clock::now();
  auto oldest = conns_.end();
  for (auto it = conns_.begin(); it != conns_.end(); ++it) {
    const Conn& c = *it->second;
    if (!c.reading || now - c.waiting_since < options_.evict_after) continue;
    if (oldest == conns_.end() || c.waiting_since < oldest->second->waiting_since) oldest = it;
  }
  if (oldest == conns_.end()) return false;
  Drop(oldest->first, "idle",
       fmt::format("closed {} (idle {} while {} clients waited)", oldest->second->peer,
                   Seconds(std::chrono::duration_cast<std::chrono::milliseconds>(now - oldest->second->waiting_since)),
                   options_.max_clients + 1));
  return true;
}

void Server::Read(uint64_t id) {
  std::shared_ptr<Conn> c = conns_.at(id);
  if (c->served == 0 || c->buffer.size() > 0) return ReadRequest(id);
  // Between requests a kept-alive client owes nothing: it waits up to
  // idle_timeout for the next request's first bytes and is then closed quietly
  // (no refusal), and only the request itself must come whole within
  // request_timeout. While waiting it is idle, and a full server may evict it.
  c->reading = true;
  c->waiting_since = Clock::now();
  c->stream.expires_after(options_.idle_timeout);
  c->stream.async_read_some(c->buffer.prepare(kFirstRead),
                            [this, id, c, alive = life_.token()](beast::error_code ec, size_t n) {
                              if (alive.expired() || !conns_.contains(id)) return;
                              c->reading = false;
                              if (ec) {  // idle for too long, or the client left: a close, not a refusal
                                c->Close();
                                conns_.erase(id);
                                return;
                              }
                              c->buffer.commit(n);
                              ReadRequest(id);
                            });
}

void Server::ReadRequest(uint64_t id) {
  std::shared_ptr<Conn> c = conns_.at(id);
  c->parser.emplace();
  c->parser->header_limit(static_cast<std::uint32_t>(options_.max_header));
  c->parser->body_limit(options_.max_body);
  c->reading = true;
  c->waiting_since = Clock::now();
  c->stream.expires_after(options_.request_timeout);
  bhttp::async_read(
      c->stream, c->buffer, *c->parser, [this, id, c, alive = life_.token()](beast::error_code ec, size_t) {
        if (alive.expired() || !conns_.contains(id)) return;
        c->reading = false;
        if (!ec) return Serve(id);
        // A client that leaves between requests, or before sending one, is no refusal.
        if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
            ec == bhttp::error::partial_message) {
          c->Close();
          conns_.erase(id);
          return;
        }
        if (ec == beast::error::timeout)
          return Drop(
              id, "slow",
              fmt::format("dropped {} (no whole request within {})", c->peer, Seconds(options_.request_timeout)));
        bhttp::status status = bhttp::status::bad_request;
        std::string why = fmt::format("not an HTTP/1.1 request: {}", ec.message());
        std::string kind = "junk";
        if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
          status = bhttp::status::request_header_fields_too_large;
          why = fmt::format("a header over {} bytes", options_.max_header);
          kind = "size";
        } else if (ec == bhttp::error::body_limit) {
          status = bhttp::status::payload_too_large;
          why = fmt::format("a body over {} bytes", options_.max_body);
          kind = "size";
        }
        std::string answer = Serialize(status, why + "\n");
        beast::error_code ignored;
        c->stream.socket().non_blocking(true, ignored);
        c->stream.socket().write_some(asio::buffer(answer), ignored);
        Drop(id, kind, fmt::format("refused {} ({})", c->peer, why));
      });
}

void Server::Serve(uint64_t id) {
  std::shared_ptr<Conn> c = conns_.at(id);
  bhttp::request<bhttp::string_body> message = c->parser->release();
  Request request{std::string(message.method_string()), std::string(message.target()), std::move(message.body()),
                  c->peer_address, c->peer};
  Response out;
  try {
    out = handler_(request);
  } catch (const std::exception& e) {
    out = Response{500, fmt::format("internal error: {}\n", e.what())};
  }
  ++answered_;
  bool keep = message.keep_alive() && ++c->served < options_.max_requests;
  c->response = {};
  c->response.version(11);
  c->response.result(out.status);
  c->response.set(bhttp::field::content_type, out.content_type);
  if (!out.allow.empty()) c->response.set(bhttp::field::allow, out.allow);
  c->response.keep_alive(keep);
  c->response.body() = std::move(out.body);
  c->response.prepare_payload();
  if (request.method == "HEAD") c->response.body().clear();  // the length stays the GET's
  c->stream.expires_after(options_.reply_timeout);
  bhttp::async_write(c->stream, c->response, [this, id, c, keep, alive = life_.token()](beast::error_code ec, size_t) {
    if (alive.expired() || !conns_.contains(id)) return;
    if (ec == beast::error::timeout)
      return Drop(
          id, "slow",
          fmt::format("dropped {} (did not take its answer within {})", c->peer, Seconds(options_.reply_timeout)));
    if (ec || !keep) {
      c->Close();
      conns_.erase(id);
      return;
    }
    Read(id);
  });
}

void Server::Drop(uint64_t id, const std::string& kind, const std::string& why) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  it->second->Close();
  conns_.erase(it);
  ++refused_;
  Refuse(kind, fmt::format("{}: {}", subject_, why));
}

void Server::Refuse(const std::string& kind, const std::string& line) {
  log_.Log(
      kind, line,
      [subject = subject_, window = log_.window()](std::size_t n) {
        return fmt::format("{}: {} more refused or dropped connection{} in the last {}", subject, n, n == 1 ? "" : "s",
                           Seconds(window));
      },
      Clock::now());
  ArmTick();
}

// The limiter writes its count lines when a window is over and it is asked
// again; this timer asks once a window while refusals come, then lets the loop be.
void Server::ArmTick() {
  if (tick_armed_) return;
  tick_armed_ = true;
  uint64_t refused_then = refused_;
  tick_timer_.expires_after(log_.window());
  tick_timer_.async_wait([this, refused_then, alive = life_.token()](boost::system::error_code ec) {
    if (ec || alive.expired()) return;
    tick_armed_ = false;
    log_.Tick(Clock::now());
    if (refused_ != refused_then) ArmTick();
  });
}

}  // namespace dlaunch::launcher::http
