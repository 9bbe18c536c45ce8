// Horovod's gloo rendezvous store, as horovodrun serves it (horovod/runner/http/
// http_server.py) and Horovod's HTTPStore asks it (horovod/common/gloo/
// http_store.cc), without the HTTP: requests in, replies out, no sockets, so
// every rule is tested alone. horovod_server.hpp puts it on the wire.
//
//   PUT    /<scope>/<key>   stores the body                        -> 200
//   GET    /<scope>/<key>   the body                               -> 200, or 404 while absent
//   DELETE /<scope>/<rank>  in a scope of the job (HorovodScopes): rank is done
//                           with it; once every rank of the scope is, the scope
//                           is emptied, so that the next hvd.init() starts clean
//                           -> 200. In another scope (Horovod's process sets
//                           make their own): removes that key.
//
// Anything else gets a 4xx/5xx and a one-line reason (the server logs it, rate
// limited): a path that is not /<scope>/<key>, a key or value over the limits,
// a store with no room for another key. Horovod's client retries such a status
// three times, 500 ms apart, then fails the worker's hvd.init() with "HTTP
// request failed": a job over the limits fails, it does not hang.
//
// Not thread-safe; the server calls it from the event loop's thread.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlaunch::launcher {

// What one job's store holds at most. Gloo's full mesh puts one value per rank
// and scope, of about 150 bytes per rank of that scope (an address per pair), so
// the bounds grow with the job: HorovodStoreLimitsFor.
struct HorovodStoreLimits {
  std::size_t max_key = 512;          // bytes of a scope or a key. Default: 512
  std::size_t max_value = 64 * 1024;  // bytes of one value. Default: 64 KiB (grows with the job)
  std::size_t max_keys = 1024;        // keys over every scope. Default: 1024 (grows with the job)
  std::size_t max_bytes = 64 << 20;   // bytes of every value together. Default: 64 MiB (grows with the job)
};

// The limits for a job of `world` ranks: a value of 64 KiB + 256 B per rank;
// 64 keys + 16 per rank; 64 MiB, or 3 full meshes of `world` ranks at 256 B a
// pair when that is more.
HorovodStoreLimits HorovodStoreLimitsFor(int world);

class HorovodStore {
 public:
  enum class Method { kGet, kPut, kDelete, kOther };
  struct Reply {
    int status = 200;
    std::string body;
    std::string refusal;  // for a 4xx/5xx: why, for the log ("value of 70000 bytes is over the limit of 65536")
  };

  // `scopes`: the job's scopes and their sizes (envmap::HorovodScopes); the
  // first of a repeated name counts.
  HorovodStore(const std::vector<std::pair<std::string, int>>& scopes, HorovodStoreLimits limits);

  // `target` is the request's path as sent ("/global/rank_0"); `body` a PUT's.
  Reply Handle(Method method, std::string_view target, std::string body);

  std::size_t keys() const { return keys_; }
  std::size_t bytes() const { return bytes_; }
  const HorovodStoreLimits& limits() const { return limits_; }

 private:
  struct Scope {
    std::map<std::string, std::string, std::less<>> values;
    std::set<int> done;  // ranks that DELETEd, in a scope of the job
  };
  Reply Get(const std::string& scope, const std::string& key) const;
  Reply Put(const std::string& scope, const std::string& key, std::string body);
  Reply Delete(const std::string& scope, const std::string& key);
  void Clear(std::map<std::string, Scope, std::less<>>::iterator it);

  std::map<std::string, int, std::less<>> sizes_;
  HorovodStoreLimits limits_;
  std::map<std::string, Scope, std::less<>> scopes_;
  std::size_t keys_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace dlaunch::launcher
