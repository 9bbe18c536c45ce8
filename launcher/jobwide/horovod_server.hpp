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
// Horovod's client cannot authenticate, so the server judges each connection
// (horovod_peers.hpp): from this machine only a socket of the job's user, from
// elsewhere only the job's nodes where dlaunch knows them; and it bounds keys,
// values and clients (HorovodStoreLimitsFor, ServerOptions). Every refusal is
// one rate-limited line. What this does not stop: anyone who can send from a
// node's address (a node's other users included) where the node is not this
// machine, or a process of the job's own user (docs/environment.md: "Horovod").
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
#include "base/status.hpp"
#include "launcher/http/server.hpp"
#include "launcher/jobwide/horovod_peers.hpp"
#include "launcher/jobwide/horovod_store.hpp"
#include "rendezvous/log_limit.hpp"

namespace dlaunch::launcher {

// The server's bounds for a job of `world` ranks: a client per rank and 64
// more, at most 4,096; bodies up to the store's largest value; a connection
// that has sent nothing for 250 ms makes room for a new one when the server is
// full (Horovod's client sends its request at once).
http::ServerOptions HorovodServerOptions(int world);

class HorovodServer {
 public:
  // Serves the store of `layout` (whole: every node's row; node rank 0 is this
  // node) on layout.master_addr at envmap::HorovodStorePort(layout).
  // `nodes_known`: the layout's node addresses are the job's (false in the
  // static form without a node list, whose other nodes are placeholders: then
  // any remote peer is served, and a line through `say` says so). A node
  // address that does not resolve here is said once; its peers are refused.
  // `owners` tells whose a local peer's socket is. Io naming the address when
  // master_addr does not resolve or cannot be bound here, or the port is taken:
  // the store never falls back to every interface.
  static Result<std::unique_ptr<HorovodServer>> Start(
      boost::asio::io_context& io, const envmap::JobLayout& layout, bool nodes_known,
      std::function<void(const std::string&)> say,
      std::shared_ptr<SocketOwners> owners = std::make_shared<KernelSocketOwners>());
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
