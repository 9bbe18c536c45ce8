// The thin Boost.Asio layer of the rendezvous: one TCP connection carrying
// framed messages. It moves bytes and nothing else; what a message means is the
// coordinator's or the agent's business.
//
// A coordinator holds one per agent, so an idle one costs little: it waits for
// readability and reads into one buffer shared by every connection of the thread
// (no read buffer of its own), and what it sends waits in one string, written
// with everything queued behind it in a single write (no deque).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "base/status.hpp"
#include "rendezvous/codec.hpp"

namespace dlaunch::rendezvous {

// "host:port", "[v6::addr]:port" or "host" (then `default_port`). Returns
// InvalidArgument naming `what` and the text when it does not parse.
struct HostPort {
  std::string host;
  int port = 0;
  std::string ToString() const;
};
Result<HostPort> ParseHostPort(const std::string& text, int default_port, const std::string& what);

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using MessageHandler = std::function<void(Message)>;
  // InvalidArgument: the peer sent a bad frame; PeerLost: it closed or failed.
  using CloseHandler = std::function<void(const Status& why)>;

  explicit Connection(boost::asio::ip::tcp::socket socket);

  // Starts reading. `on_message` gets each whole message in order; `on_close`
  // is called once when the connection ends, with why: a bad frame
  // (InvalidArgument "frame: bad magic ..."), or the peer closed or failed
  // (PeerLost). It is not called after Close().
  // Both run on the io_context's thread.
  void Start(MessageHandler on_message, CloseHandler on_close);
  // Queues a message; messages leave in the order sent.
  void Send(const Message& message);
  // Sends what is queued, then closes. Handlers are not called after this.
  void Close();
  bool open() const { return open_; }
  // Bytes the peer sent that this process has not read yet (FIONREAD): a
  // process that was starved of CPU or stopped finds its peer's heartbeats
  // here, and must not call that peer silent.
  size_t unread() const;
  // The peer's address, "10.0.0.2:51234", for log lines.
  const std::string& peer() const { return peer_; }
  // This end's address ("10.0.0.1"): what the peer reaches this host at.
  std::string local_address() const { return LocalAddress(); }

 private:
  void WaitRead();
  // Reads what the socket holds without blocking and hands on its messages;
  // false when the connection ended or was closed meanwhile.
  bool ReadReady();
  void WriteNext();
  void Fail(const Status& why);
  std::string LocalAddress() const;

  boost::asio::ip::tcp::socket socket_;
  std::string peer_;
  FrameDecoder decoder_;
  std::string writing_bytes_;  // frames being written (one async_write)
  std::string queued_;         // frames sent meanwhile, written next
  bool writing_ = false;
  bool open_ = true;
  bool closing_ = false;
  MessageHandler on_message_;
  CloseHandler on_close_;
};

}  // namespace dlaunch::rendezvous
