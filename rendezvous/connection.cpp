#include "rendezvous/connection.hpp"

#include <fcntl.h>

#include <array>

#include <boost/asio/write.hpp>
#include <fmt/format.h>

namespace dlaunch::rendezvous {

namespace asio = boost::asio;
using asio::ip::tcp;

std::string HostPort::ToString() const {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

Result<HostPort> ParseHostPort(const std::string& text, int default_port, const std::string& what) {
  auto bad = [&] { return Status::InvalidArgument(fmt::format("{} {}: expected HOST:PORT", what, text)); };
  HostPort hp;
  std::string port_text;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos) return bad();
    hp.host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return bad();
      port_text = text.substr(close + 2);
    }
  } else {
    size_t colon = text.rfind(':');
    if (colon != std::string::npos && text.find(':') != colon) colon = std::string::npos;  // bare IPv6
    hp.host = text.substr(0, colon);
    if (colon != std::string::npos) port_text = text.substr(colon + 1);
  }
  if (hp.host.empty()) return bad();
  hp.port = default_port;
  if (!port_text.empty() || text.back() == ':') {
    try {
      size_t used = 0;
      hp.port = std::stoi(port_text, &used);
      if (used != port_text.size()) return bad();
    } catch (const std::exception&) {
      return bad();
    }
  }
  if (hp.port < 1 || hp.port > 65535) return bad();
  return hp;
}

Connection::Connection(tcp::socket socket) : socket_(std::move(socket)) {
  boost::system::error_code ec;
  tcp::endpoint ep = socket_.remote_endpoint(ec);
  peer_ = ec ? "unknown peer" : fmt::format("{}:{}", ep.address().to_string(), ep.port());
  socket_.set_option(tcp::no_delay(true), ec);
  // Reads happen when the socket is readable, and must not block then.
  socket_.non_blocking(true, ec);
  // Asio opens sockets without close-on-exec: a worker must not inherit the
  // agent's connection, or the coordinator would not see it close when the
  // agent dies. Everything runs on the spawning thread, so no fork comes between.
  fcntl(socket_.native_handle(), F_SETFD, FD_CLOEXEC);
}

void Connection::Start(MessageHandler on_message, CloseHandler on_close) {
  on_message_ = std::move(on_message);
  on_close_ = std::move(on_close);
  WaitRead();
}

// Waiting rather than async_read_some: a pending read needs its own buffer, and a
// coordinator with 100,000 idle agents would hold 100,000 of them. Asio re-arms
// epoll for each wait (EPOLL_CTL_MOD), which reports bytes left unread at once.
void Connection::WaitRead() {
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](boost::system::error_code ec) {
    if (!self->open_ || self->closing_) return;
    if (ec) return self->Fail(Status::PeerLost(ec.message()));
    if (self->ReadReady()) self->WaitRead();
  });
}

bool Connection::ReadReady() {
  // One buffer for every connection of this thread: the bytes are copied into the
  // decoder before any handler runs.
  static thread_local std::array<char, 65536> buf;
  for (;;) {
    boost::system::error_code ec;
    size_t n = socket_.read_some(asio::buffer(buf), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) return true;
    if (ec) {
      Fail(Status::PeerLost(ec == asio::error::eof ? "closed by the peer" : ec.message()));
      return false;
    }
    decoder_.Feed(std::string_view(buf.data(), n));
    for (;;) {
      Result<std::optional<Message>> next = decoder_.Next();
      if (!next.ok()) {
        Fail(next.status());
        return false;
      }
      if (!next->has_value()) break;
      on_message_(std::move(**next));
      if (!open_ || closing_) return false;  // the handler closed us
    }
    if (n < buf.size()) return true;  // drained; the next wait reports anything newer
  }
}

void Connection::Send(const Message& message) {
  if (!open_ || closing_) return;
  queued_ += Encode(message);
  if (!writing_) WriteNext();
}

void Connection::WriteNext() {
  if (queued_.empty()) {
    writing_ = false;
    // Idle: hold no buffer (a coordinator has an idle connection per agent).
    std::string().swap(writing_bytes_);
    std::string().swap(queued_);
    if (closing_) {
      boost::system::error_code ignored;
      socket_.shutdown(tcp::socket::shutdown_both, ignored);
      socket_.close(ignored);
      open_ = false;
    }
    return;
  }
  writing_ = true;
  // Everything queued leaves in one write, in the order it was sent.
  writing_bytes_.clear();
  writing_bytes_.swap(queued_);
  // Most frames fit the socket's buffer at once: then nothing waits for a
  // completion, neither an Asio operation nor the frame (at an assignment the
  // coordinator writes to every agent in one go: 100,000 of each). Whatever is
  // left, or an error, goes the asynchronous way, which reports it.
  boost::system::error_code ec;
  std::size_t n = socket_.write_some(asio::buffer(writing_bytes_), ec);
  if (!ec && n == writing_bytes_.size()) return WriteNext();
  if (!ec) writing_bytes_.erase(0, n);
  asio::async_write(socket_, asio::buffer(writing_bytes_),
                    [self = shared_from_this()](boost::system::error_code ec, size_t) {
                      if (!self->open_) return;
                      if (ec) {
                        self->queued_.clear();
                        if (self->closing_) {
                          self->writing_ = false;
                          self->WriteNext();
                        } else {
                          self->Fail(Status::PeerLost(ec.message()));
                        }
                        return;
                      }
                      self->WriteNext();
                    });
}

size_t Connection::unread() const {
  boost::system::error_code ec;
  size_t n = open_ ? socket_.available(ec) : 0;
  return ec ? 0 : n;
}

void Connection::Close() {
  if (!open_ || closing_) return;
  closing_ = true;
  if (!writing_) WriteNext();
}

void Connection::Fail(const Status& why) {
  if (!open_) return;
  open_ = false;
  boost::system::error_code ignored;
  socket_.close(ignored);
  queued_.clear();
  if (on_close_) {
    CloseHandler handler = std::move(on_close_);
    handler(why);
  }
}

std::string Connection::LocalAddress() const {
  boost::system::error_code ec;
  tcp::endpoint ep = socket_.local_endpoint(ec);
  return ec ? "" : ep.address().to_string();
}

}  // namespace dlaunch::rendezvous
