// A small HTTP/1.1 server on the event loop, for the programs that cannot speak
// dlaunch's own protocol: Prometheus and Kubernetes probes, and Horovod's gloo
// rendezvous store. Boost.Beast reads and writes the messages; this part adds
// what a server facing an unauthenticated network needs and Beast leaves to its
// user: bounds on everything a peer controls, and lines about refusals that a
// peer cannot turn into a flood.
//
// The bounds (ServerOptions):
//   - at most `max_clients` connections. When full, the connection that has
//     waited longest for a request (and at least `evict_after`) is closed to make
//     room, so that a crowd of idle connections cannot lock the probes out; when
//     none has, the newcomer gets 503 and is closed;
//   - a request's header within `max_header` bytes (else 431) and its body within
//     `max_body` (else 413); junk gets 400; each then closes;
//   - a whole request within `request_timeout` of the server's starting to wait
//     for it (a slowloris is closed then), and an answer taken within
//     `reply_timeout` (a client that stops reading is closed);
//   - at most `max_requests` requests on one kept-alive connection, so one peer
//     pipelining a flood takes its turn like the others; the last answer says
//     "Connection: close";
//   - at most `max_unsent` bytes of a connection's answers waiting in the
//     kernel to be sent: the next request is read only once the last answer is
//     written, and the kernel takes an answer only while less than that is
//     unsent (TCP_NOTSENT_LOWAT). A client that pipelines requests and reads
//     nothing thus stops being read, its requests wait in its own send buffer,
//     TCP throttles it, and it is dropped after `reply_timeout`; it cannot
//     make this server hold its answers in kernel memory;
//   - `admit`, when set, judges each connection; those it refuses are closed
//     unanswered.
// Each refusal is one line through `log`, at most 5 of each kind in 10 s and
// then a count (rendezvous::LogLimiter). Out of descriptors, accept() backs off
// (rendezvous::AcceptBackoff) instead of spinning.
//
// The handler runs on the loop and must answer at once: it never waits on a
// worker or a peer. Every call happens on the io_context's thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/status.hpp"
#include "launcher/core/event_loop.hpp"
#include "rendezvous/accept_retry.hpp"
#include "rendezvous/log_limit.hpp"

namespace dlaunch::launcher::http {

struct Request {
  std::string method;  // as sent: "GET", "PUT", "DELETE", ...
  std::string target;  // as sent, not decoded: "/metrics", "/global/0"
  std::string body;
  boost::asio::ip::address peer_address;
  std::string peer;  // "10.0.0.2:51234", "[::1]:51234"
};

struct Response {
  unsigned status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
  std::string allow;  // the Allow field of a 405 (empty: none)
};

using Handler = std::function<Response(const Request&)>;

struct ServerOptions {
  std::string name = "http";                         // each line starts "NAME on ADDR:PORT: "
  size_t max_clients = 64;                           // Default: 64 connections at once
  size_t max_header = 8 * 1024;                      // Default: 8 KiB of request line and fields
  size_t max_body = 64 * 1024;                       // Default: 64 KiB of body
  size_t max_requests = 1000;                        // Default: 1,000 requests on one connection
  std::chrono::milliseconds request_timeout{10000};  // Default: 10s for a whole request
  // Default: 5 min for a kept-alive connection's next request to begin, then
  // closed without a line: Prometheus keeps its connection between scrapes,
  // 15 s apart by default and often a minute or more.
  std::chrono::milliseconds idle_timeout{300000};
  std::chrono::milliseconds reply_timeout{5000};  // Default: 5s for a client to take an answer
  size_t max_unsent = 16 * 1024;                  // Default: 16 KiB of answers unsent before reading stops
  std::chrono::milliseconds evict_after{1000};    // Default: idle 1s before a full server evicts it
  // Who is served, asked once a connection is accepted, with its local and
  // remote ends: empty to serve it, else why not (the refusal line's reason).
  // Null: every peer.
  std::function<std::string(const boost::asio::ip::tcp::endpoint& ours, const boost::asio::ip::tcp::endpoint& theirs)>
      admit;
};

// "ADDR:PORT" as a listening address: an IPv4 literal, a bracketed IPv6 literal
// or "localhost" (127.0.0.1), then a port of 0 to 65535; a port alone binds
// loopback. InvalidArgument naming `text` otherwise (a host name is refused
// rather than resolved: a lookup could block, and a name may have several
// addresses).
Result<boost::asio::ip::tcp::endpoint> ParseListenAddress(const std::string& text);

// "ADDR:PORT" as ParseListenAddress reads it (IPv6 bracketed).
std::string FormatEndpoint(const boost::asio::ip::tcp::endpoint& endpoint);

class Server {
 public:
  // Listens on `where` (port 0: one the kernel chooses; endpoint() says which).
  // Io naming the address when it cannot be bound.
  static Result<std::unique_ptr<Server>> Start(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& where,
                                               Handler handler, std::function<void(const std::string&)> log,
                                               ServerOptions options = {});
  // Closes the listener and every connection; their queued handlers see the
  // Lifetime token and return.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  boost::asio::ip::tcp::endpoint endpoint() const { return endpoint_; }
  size_t clients() const { return conns_.size(); }
  uint64_t answered() const { return answered_; }  // requests the handler answered
  uint64_t refused() const { return refused_; }    // connections refused, dropped or evicted

 private:
  struct Conn;
  Server(boost::asio::io_context& io, Handler handler, std::function<void(const std::string&)> log,
         ServerOptions options);
  void Accept();
  void Admit(boost::asio::ip::tcp::socket socket);
  bool MakeRoom();
  void Read(uint64_t id);         // waits for a request: idle first on a kept-alive connection
  void ReadRequest(uint64_t id);  // reads one whole request within request_timeout
  void Serve(uint64_t id);
  void Drop(uint64_t id, const std::string& kind, const std::string& why);
  void Refuse(const std::string& kind, const std::string& line);
  void ArmTick();

  boost::asio::io_context& io_;
  Handler handler_;
  ServerOptions options_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::ip::tcp::endpoint endpoint_;
  rendezvous::AcceptRetry accept_retry_;
  boost::asio::steady_timer tick_timer_;
  bool tick_armed_ = false;
  rendezvous::LogLimiter log_;
  std::string subject_;  // "NAME on ADDR:PORT"
  std::map<uint64_t, std::shared_ptr<Conn>> conns_;
  uint64_t next_id_ = 0;
  uint64_t answered_ = 0;
  uint64_t refused_ = 0;
  Lifetime life_;  // last: expires first
};

}  // namespace dlaunch::launcher::http
