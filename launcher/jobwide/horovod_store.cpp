#include "launcher/jobwide/horovod_store.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

namespace dlaunch::launcher {

namespace {

// Horovod's server splits the path on '/' and wants exactly three parts; its
// client puts the scope and the key in as they are, and both are names gloo and
// Horovod make (a rank, "rank_0", a hostname). So a part is 1 to max_key
// printable ASCII characters other than '/'.
bool GoodPart(std::string_view part, std::size_t max) {
  if (part.empty() || part.size() > max) return false;
  return std::all_of(part.begin(), part.end(), [](char c) { return c > ' ' && c < 0x7f && c != '/'; });
}

HorovodStore::Reply Refuse(int status, std::string why) { return {status, "", std::move(why)}; }

}  // namespace

HorovodStoreLimits HorovodStoreLimitsFor(int world) {
  const std::size_t n = static_cast<std::size_t>(std::max(world, 1));
  HorovodStoreLimits l;
  l.max_value = 64 * 1024 + 256 * n;
  l.max_keys = 64 + 16 * n;
  l.max_bytes = std::max<std::size_t>(64 << 20, 3 * 256 * n * n);
  return l;
}

HorovodStore::HorovodStore(const std::vector<std::pair<std::string, int>>& scopes, HorovodStoreLimits limits)
    : limits_(limits) {
  for (const auto& [name, size] : scopes) sizes_.emplace(name, size);
}

HorovodStore::Reply HorovodStore::Handle(Method method, std::string_view target, std::string body) {
  if (method == Method::kOther) return Refuse(405, "only GET, PUT and DELETE are served");
  if (target.empty() || target.front() != '/') return Refuse(400, "the path is not /SCOPE/KEY");
  std::string_view rest = target.substr(1);
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return Refuse(400, "the path is not /SCOPE/KEY");
  std::string_view scope = rest.substr(0, slash);
  std::string_view key = rest.substr(slash + 1);
  if (!GoodPart(scope, limits_.max_key) || !GoodPart(key, limits_.max_key)) {
    return Refuse(
        400, fmt::format("the path is not /SCOPE/KEY (each 1 to {} printable characters, no '/')", limits_.max_key));
  }
  switch (method) {
    case Method::kGet:
      return Get(std::string(scope), std::string(key));
    case Method::kPut:
      return Put(std::string(scope), std::string(key), std::move(body));
    case Method::kDelete:
      return Delete(std::string(scope), std::string(key));
    case Method::kOther:
      break;
  }
  return Refuse(405, "only GET, PUT and DELETE are served");
}

HorovodStore::Reply HorovodStore::Get(const std::string& scope, const std::string& key) const {
  auto s = scopes_.find(scope);
  if (s == scopes_.end()) return {404, "", ""};
  auto v = s->second.values.find(key);
  if (v == s->second.values.end()) return {404, "", ""};
  return {200, v->second, ""};
}

HorovodStore::Reply HorovodStore::Put(const std::string& scope, const std::string& key, std::string body) {
  if (body.size() > limits_.max_value) {
    return Refuse(413, fmt::format("a value of {} bytes is over the limit of {}", body.size(), limits_.max_value));
  }
  Scope& s = scopes_[scope];
  auto v = s.values.find(key);
  const std::size_t old = v == s.values.end() ? 0 : v->second.size();
  if (v == s.values.end() && keys_ >= limits_.max_keys) {
    if (s.values.empty()) scopes_.erase(scope);
    return Refuse(507, fmt::format("the store holds its limit of {} keys", limits_.max_keys));
  }
  if (bytes_ - old + body.size() > limits_.max_bytes) {
    if (s.values.empty()) scopes_.erase(scope);
    return Refuse(507, fmt::format("the store holds {} bytes, and {} more would pass its limit of {}", bytes_,
                                   body.size(), limits_.max_bytes));
  }
  bytes_ = bytes_ - old + body.size();
  if (v == s.values.end()) {
    ++keys_;
    s.values.emplace(key, std::move(body));
  } else {
    v->second = std::move(body);
  }
  return {200, "", ""};
}

HorovodStore::Reply HorovodStore::Delete(const std::string& scope, const std::string& key) {
  auto size = sizes_.find(scope);
  auto s = scopes_.find(scope);
  if (size == sizes_.end()) {
    // A scope of the client's own making (a process set's): the key goes, and the
    // scope with its last key, as Horovod's server does.
    if (s == scopes_.end()) return {200, "", ""};
    auto v = s->second.values.find(key);
    if (v != s->second.values.end()) {
      bytes_ -= v->second.size();
      --keys_;
      s->second.values.erase(v);
    }
    if (s->second.values.empty()) scopes_.erase(s);
    return {200, "", ""};
  }
  int rank = -1;
  auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), rank);
  if (ec != std::errc() || end != key.data() + key.size() || rank < 0 || rank >= size->second) {
    return Refuse(400, fmt::format("DELETE /{}/{}: scope {} has ranks 0 to {}", scope, key, scope, size->second - 1));
  }
  if (s == scopes_.end()) s = scopes_.emplace(scope, Scope{}).first;
  s->second.done.insert(rank);
  // Every rank is done with it: the next rendezvous in this scope starts clean.
  if (static_cast<int>(s->second.done.size()) >= size->second) Clear(s);
  return {200, "", ""};
}

void HorovodStore::Clear(std::map<std::string, Scope, std::less<>>::iterator it) {
  for (const auto& [key, value] : it->second.values) bytes_ -= value.size();
  keys_ -= it->second.values.size();
  scopes_.erase(it);
}

}  // namespace dlaunch::launcher
