// --env horovod: node rank 0's dlaunch serves Horovod's gloo rendezvous store
// (horovod_store.hpp) over HTTP (launcher/http/server.hpp), so that hvd.init()
// starts under dlaunch without MPI and without horovodrun.
//
// Where: on node rank 0's address (the job's MASTER_ADDR) at MASTER_PORT + 1
// (envmap::HorovodStorePort: every node computes it from what it already knows).
// For how long: one generation of workers. The modes make one for each
// rendezvous assignment and Reset it at each local restart, so every restart
// meets a clean store; it closes with the job.
//
// Horovod's client cannot authenticate, so the server admits only the job's
// nodes (their addresses, resolved when it starts) and loopback, and bounds
// keys, values and clients (HorovodStoreLimitsFor, ServerOptions); every
// refusal is one rate-limited line. What this does not stop: a local user of a
// node, or anyone who can send from a node's address, can read and write the
// store (README: "Horovod").
//
// Every call on the event loop's thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>

#include "envmap/layout.hpp"
#include "envmap/status.hpp"
#include "launcher/http/server.hpp"
#include "launcher/jobwide/horovod_store.hpp"
#include "rendezvous/log_limit.hpp"

namespace dlaunch::launcher {

// True when `peer` may use the store: a loopback address, or one of `nodes`
// (an IPv4-mapped IPv6 peer counts as its IPv4 address).
bool HorovodPeerAllowed(const boost::asio::ip::address& peer, const std::vector<boost::asio::ip::address>& nodes);

// The server's bounds for a job of `world` ranks: a client per rank and 64
// more, at most 4,096; bodies up to the store's largest value; a connection
// that has sent nothing for 250 ms makes room for a new one when the server is
// full (Horovod's client sends its request at once).
http::ServerOptions HorovodServerOptions(int world);

class HorovodServer {
 public:
  // Serves the store of `layout` (whole: every node's row; node rank 0 is this
  // node) on layout.master_addr at envmap::HorovodStorePort(layout). A
  // master_addr that cannot be bound here (a name for an address of a NAT)
  // falls back to every interface, with a line through `say`; the peer filter
  // holds either way. Io naming the address and port when the port cannot be
  // bound.
  static Result<std::unique_ptr<HorovodServer>> Start(boost::asio::io_context& io, const envmap::JobLayout& layout,
                                                      std::function<void(const std::string&)> say);
  ~HorovodServer();

  // A new generation of the same layout: the store starts empty.
  void Reset();
  int port() const;
  const HorovodStore& store() const { return *store_; }

 private:
  HorovodServer(std::vector<std::pair<std::string, int>> scopes, HorovodStoreLimits limits,
                std::function<void(const std::string&)> say);
  http::Response Serve(const http::Request& request);

  std::vector<std::pair<std::string, int>> scopes_;
  HorovodStoreLimits limits_;
  std::unique_ptr<HorovodStore> store_;
  rendezvous::LogLimiter log_;  // the store's own refusals (a bad path, a full store)
  std::string subject_;         // "horovod store on ADDR:PORT"
  std::unique_ptr<http::Server> server_;
};

}  // namespace dlaunch::launcher
