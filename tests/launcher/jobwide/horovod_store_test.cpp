#include "launcher/jobwide/horovod_store.hpp"

#include <catch2/catch.hpp>

#include <string>

namespace dlaunch::launcher {
namespace {

using M = HorovodStore::Method;

// A 2+1 job's scopes (envmap::HorovodScopes, shortened).
HorovodStore TwoPlusOne(HorovodStoreLimits limits = {}) {
  return HorovodStore({{"global", 3}, {"local_a", 2}, {"local_b", 1}, {"cross_0", 2}, {"cross_1", 1}}, limits);
}

}  // namespace

TEST_CASE("HorovodStore: GET is 404 until the PUT, then the body", "[horovod_store]") {
  HorovodStore store = TwoPlusOne();
  CHECK(store.Handle(M::kGet, "/global/0", "").status == 404);
  CHECK(store.Handle(M::kPut, "/global/0", "addr-of-0").status == 200);
  HorovodStore::Reply got = store.Handle(M::kGet, "/global/0", "");
  CHECK(got.status == 200);
  CHECK(got.body == "addr-of-0");
  // Scopes are apart: the same key elsewhere is still absent.
  CHECK(store.Handle(M::kGet, "/local_a/0", "").status == 404);
  // A PUT again replaces the value; the count of keys and bytes follows.
  CHECK(store.Handle(M::kPut, "/global/0", "x").status == 200);
  CHECK(store.Handle(M::kGet, "/global/0", "").body == "x");
  CHECK(store.keys() == 1);
  CHECK(store.bytes() == 1);
  // An empty value is a value.
  CHECK(store.Handle(M::kPut, "/global/1", "").status == 200);
  CHECK(store.Handle(M::kGet, "/global/1", "").status == 200);
}

TEST_CASE("HorovodStore: a scope empties once every one of its ranks DELETEs", "[horovod_store]") {
  HorovodStore store = TwoPlusOne();
  for (const char* k : {"/global/0", "/global/1", "/global/2", "/local_a/0", "/local_a/1"})
    REQUIRE(store.Handle(M::kPut, k, "v").status == 200);
  CHECK(store.keys() == 5);
  CHECK(store.Handle(M::kDelete, "/global/0", "").status == 200);
  CHECK(store.Handle(M::kDelete, "/global/0", "").status == 200);  // twice counts once
  CHECK(store.Handle(M::kDelete, "/global/2", "").status == 200);
  CHECK(store.Handle(M::kGet, "/global/1", "").status == 200);  // rank 1 is not done yet
  CHECK(store.Handle(M::kDelete, "/global/1", "").status == 200);
  CHECK(store.Handle(M::kGet, "/global/1", "").status == 404);
  CHECK(store.keys() == 2);
  CHECK(store.bytes() == 2);
  // The other scope is untouched; the emptied one serves a second rendezvous.
  CHECK(store.Handle(M::kGet, "/local_a/1", "").status == 200);
  CHECK(store.Handle(M::kPut, "/global/0", "again").status == 200);
  CHECK(store.Handle(M::kDelete, "/global/0", "").status == 200);
  CHECK(store.Handle(M::kGet, "/global/0", "").body == "again");  // a fresh count: 1 of 3 done
}

TEST_CASE("HorovodStore: DELETE in a scope of the job names one of its ranks", "[horovod_store]") {
  HorovodStore store = TwoPlusOne();
  HorovodStore::Reply r = store.Handle(M::kDelete, "/local_a/2", "");
  CHECK(r.status == 400);
  CHECK(r.refusal == "DELETE /local_a/2: scope local_a has ranks 0 to 1");
  CHECK(store.Handle(M::kDelete, "/local_a/-1", "").status == 400);
  CHECK(store.Handle(M::kDelete, "/local_a/1x", "").status == 400);
  CHECK(store.Handle(M::kDelete, "/cross_1/0", "").status == 200);
}

TEST_CASE("HorovodStore: a scope the job does not know is the client's own", "[horovod_store]") {
  // Horovod's process sets make "global_process_set_hash_H"; DELETE removes a key.
  HorovodStore store = TwoPlusOne();
  REQUIRE(store.Handle(M::kPut, "/global_process_set_hash_ab/0", "v").status == 200);
  REQUIRE(store.Handle(M::kPut, "/global_process_set_hash_ab/1", "vv").status == 200);
  CHECK(store.Handle(M::kDelete, "/global_process_set_hash_ab/0", "").status == 200);
  CHECK(store.Handle(M::kGet, "/global_process_set_hash_ab/0", "").status == 404);
  CHECK(store.Handle(M::kGet, "/global_process_set_hash_ab/1", "").status == 200);
  CHECK(store.Handle(M::kDelete, "/global_process_set_hash_ab/1", "").status == 200);
  CHECK(store.Handle(M::kDelete, "/never_seen/1", "").status == 200);
  CHECK(store.keys() == 0);
  CHECK(store.bytes() == 0);
}

TEST_CASE("HorovodStore: paths that are not /SCOPE/KEY", "[horovod_store]") {
  HorovodStore store = TwoPlusOne();
  for (const char* path : {"", "/", "global/0", "/global", "/global/", "//0", "/global/0/extra", "/glo bal/0",
                           "/global/\x01", "/global/\xff"}) {
    INFO(path);
    HorovodStore::Reply r = store.Handle(M::kPut, path, "v");
    CHECK(r.status == 400);
    CHECK_FALSE(r.refusal.empty());
  }
  CHECK(store.Handle(M::kOther, "/global/0", "").status == 405);
  CHECK(store.Handle(M::kGet, "/global/" + std::string(513, 'k'), "").status == 400);
  CHECK(store.Handle(M::kGet, "/global/" + std::string(512, 'k'), "").status == 404);
  CHECK(store.keys() == 0);
}

TEST_CASE("HorovodStore: the bounds on a value, the keys and the bytes", "[horovod_store]") {
  HorovodStoreLimits limits;
  limits.max_value = 10;
  limits.max_keys = 3;
  limits.max_bytes = 25;
  HorovodStore store = TwoPlusOne(limits);
  HorovodStore::Reply big = store.Handle(M::kPut, "/global/0", std::string(11, 'v'));
  CHECK(big.status == 413);
  CHECK(big.refusal == "a value of 11 bytes is over the limit of 10");
  CHECK(store.Handle(M::kPut, "/global/0", std::string(10, 'v')).status == 200);
  CHECK(store.Handle(M::kPut, "/global/1", std::string(10, 'v')).status == 200);
  HorovodStore::Reply over = store.Handle(M::kPut, "/global/2", std::string(6, 'v'));
  CHECK(over.status == 507);
  CHECK(over.refusal == "the store holds 20 bytes, and 6 more would pass its limit of 25");
  CHECK(store.Handle(M::kPut, "/global/2", std::string(5, 'v')).status == 200);
  HorovodStore::Reply full = store.Handle(M::kPut, "/other/0", "v");
  CHECK(full.status == 507);
  CHECK(full.refusal == "the store holds its limit of 3 keys");
  // A refused PUT into a new scope leaves nothing behind; replacing a key still works.
  CHECK(store.Handle(M::kGet, "/other/0", "").status == 404);
  CHECK(store.Handle(M::kPut, "/global/2", "").status == 200);
  CHECK(store.keys() == 3);
  CHECK(store.bytes() == 20);
}

TEST_CASE("HorovodStoreLimitsFor grows with the job", "[horovod_store]") {
  HorovodStoreLimits one = HorovodStoreLimitsFor(1);
  CHECK(one.max_value == 64 * 1024 + 256);
  CHECK(one.max_keys == 80);
  CHECK(one.max_bytes == std::size_t{64} << 20);
  HorovodStoreLimits big = HorovodStoreLimitsFor(1024);
  CHECK(big.max_value == 64 * 1024 + 256 * 1024);
  CHECK(big.max_keys == 64 + 16 * 1024);
  CHECK(big.max_bytes == std::size_t{3} * 256 * 1024 * 1024);
}

}  // namespace dlaunch::launcher
