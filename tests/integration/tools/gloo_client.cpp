// A Horovod worker's gloo start-up, without Horovod: the test client of issue 22.
// It reads the variables dlaunch --env horovod sets, implements gloo's
// rendezvous::Store over HTTP the way Horovod's HTTPStore does
// (horovod/common/gloo/http_store.cc: /<scope>/<key>, GET polled every 10 ms
// while 404, any other status retried 3 times 500 ms apart), and creates the
// three contexts Horovod's GlooContext::Initialize creates: "global",
// "local_<HOROVOD_HOSTNAME>" and "cross_<local rank>", each with
// connectFullMesh, a barrier and then DELETE /<scope>/<rank>. Then each context
// runs an allreduce and the sums are checked.
//
//   gloo_client [INITS]   (default 2: the second init finds its scopes cleared)
//
// Prints "rank R init I: global G local L cross C" per init; exits 1 naming
// what failed.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) throw std::runtime_error(std::string(name) + " is not set");
  return v;
}
int EnvInt(const char* name) { return std::stoi(Env(name)); }

class HttpStore : public gloo::rendezvous::Store {
 public:
  HttpStore(std::string host, std::string port, std::string scope)
      : host_(std::move(host)), port_(std::move(port)), scope_(std::move(scope)) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Expect200(Send(http::verb::put, key, std::string(data.begin(), data.end())), "PUT", key);
  }
  // As Horovod's HTTPStore::get: an absent key (404) reads as empty. gloo
  // (2022) reads "rank_<i>" of every lower rank without waiting, to count the
  // ranks on its host; the real addresses it waits for first.
  std::vector<char> get(const std::string& key) override {
    auto r = Send(http::verb::get, key, "");
    return std::vector<char>(r.body().begin(), r.body().end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (const std::string& key : keys) {
      while (Send(http::verb::get, key, "").result_int() == 404) {
        if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("wait timed out for " + Url(key));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
  // Horovod's HTTPStore::Finalize: this rank is done with the scope.
  void Finalize(int rank) {
    Expect200(Send(http::verb::delete_, std::to_string(rank), ""), "DELETE", std::to_string(rank));
  }

 private:
  using Response = http::response<http::string_body>;

  std::string Url(const std::string& key) const { return "/" + scope_ + "/" + key; }

  void Expect200(const Response& r, const char* method, const std::string& key) const {
    if (r.result_int() != 200)
      throw std::runtime_error(std::string(method) + " " + Url(key) + ": status " + std::to_string(r.result_int()));
  }

  // One connection per request, as Horovod's client; a status other than 200
  // and 404, or a failed connection, is retried 3 times, 500 ms apart.
  Response Send(http::verb verb, const std::string& key, const std::string& body) {
    std::string last;
    for (int attempt = 0; attempt < 3; ++attempt) {
      try {
        asio::io_context io;
        asio::ip::tcp::resolver resolver(io);
        beast::tcp_stream stream(io);
        stream.connect(resolver.resolve(host_, port_));
        http::request<http::string_body> req(verb, Url(key), 11);
        req.set(http::field::host, host_);
        req.body() = body;
        req.prepare_payload();
        http::write(stream, req);
        beast::flat_buffer buffer;
        Response res;
        http::read(stream, buffer, res);
        beast::error_code ec;
        stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
        if (std::getenv("GLOO_CLIENT_TRACE") != nullptr)
          std::cerr << "trace " << Env("HOROVOD_RANK") << ": " << req.method_string() << " " << Url(key) << " -> "
                    << res.result_int() << std::endl;
        if (res.result_int() == 200 || res.result_int() == 404) return res;
        last = "status " + std::to_string(res.result_int());
      } catch (const std::exception& e) {
        last = e.what();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    throw std::runtime_error(Url(key) + ": HTTP request failed (" + last + ")");
  }

  std::string host_, port_, scope_;
};

std::shared_ptr<gloo::Context> Rendezvous(const std::string& scope, int rank, int size,
                                          std::shared_ptr<gloo::transport::Device>& dev) {
  HttpStore store(Env("HOROVOD_GLOO_RENDEZVOUS_ADDR"), Env("HOROVOD_GLOO_RENDEZVOUS_PORT"), scope);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(std::chrono::seconds(30));
  context->connectFullMesh(store, dev);
  gloo::BarrierOptions opts(context);
  gloo::barrier(opts);
  store.Finalize(rank);
  return context;
}

// Every rank gives `mine`; returns the sum.
long Sum(const std::shared_ptr<gloo::Context>& context, long mine) {
  long value = mine;
  gloo::AllreduceOptions opts(context);
  opts.setOutput(&value, 1);
  opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<long>));
  gloo::allreduce(opts);
  return value;
}

void Check(const char* what, long got, long want) {
  if (got != want)
    throw std::runtime_error(std::string(what) + " sum " + std::to_string(got) + ", expected " + std::to_string(want));
}

}  // namespace

int main(int argc, char** argv) {
  const int inits = argc > 1 ? std::atoi(argv[1]) : 2;
  int rank = -1;
  try {
    rank = EnvInt("HOROVOD_RANK");
    const int size = EnvInt("HOROVOD_SIZE"), local_rank = EnvInt("HOROVOD_LOCAL_RANK"),
              local_size = EnvInt("HOROVOD_LOCAL_SIZE"), cross_rank = EnvInt("HOROVOD_CROSS_RANK"),
              cross_size = EnvInt("HOROVOD_CROSS_SIZE");
    if (Env("HOROVOD_CONTROLLER") != "gloo" || Env("HOROVOD_CPU_OPERATIONS") != "gloo")
      throw std::runtime_error("HOROVOD_CONTROLLER and HOROVOD_CPU_OPERATIONS are not gloo");
    gloo::transport::tcp::attr attr;
    attr.iface = Env("HOROVOD_GLOO_IFACE");
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    for (int init = 1; init <= inits; ++init) {
      auto global = Rendezvous("global", rank, size, dev);
      auto local = Rendezvous("local_" + Env("HOROVOD_HOSTNAME"), local_rank, local_size, dev);
      auto cross = Rendezvous("cross_" + std::to_string(local_rank), cross_rank, cross_size, dev);
      // Each context's sum of (its rank + 1), and the global ranks' sum.
      const long g = Sum(global, rank + 1), l = Sum(local, local_rank + 1), c = Sum(cross, cross_rank + 1);
      Check("global", g, static_cast<long>(size) * (size + 1) / 2);
      Check("local", l, static_cast<long>(local_size) * (local_size + 1) / 2);
      Check("cross", c, static_cast<long>(cross_size) * (cross_size + 1) / 2);
      std::cout << "rank " << rank << " init " << init << ": global " << g << " local " << l << " cross " << c
                << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << "gloo_client rank " << rank << ": " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
