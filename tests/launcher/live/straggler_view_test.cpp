// What the straggler watch adds to `dlaunch status` and `dlaunch stacks`: JSON
// that the client's strict parser takes, whatever bytes a worker's frame keys
// or a node's host name hold.
#include "launcher/live/straggler_view.hpp"

#include <string>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <catch2/catch.hpp>

namespace dlaunch::launcher {
namespace {

// The document as the live client reads it: serialized, then parsed strictly.
bool ClientParses(const boost::json::object& doc) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(boost::json::serialize(doc), ec);
  return !ec && v.is_object();
}

TEST_CASE("a frame key or host that is not UTF-8 leaves the answer JSON", "[straggler_view]") {
  // A samples file may hold any byte but a control character in a key, and a
  // node may join under any host name.
  std::string key = "d\xff\xfe.py:1 load\xc3";
  RankWindow w;
  w.rank = 1;
  w.host = "h\x80";
  w.samples.ticks = 20;
  w.samples.user[key] = 15;
  w.samples.top[key] = 15;
  w.samples.top["torch/autograd/__init__.py:197 backward"] = 5;
  boost::json::object stacks{{"profile", ProfileOf({w}, std::chrono::seconds(60))}};
  CHECK(ClientParses(stacks));

  Straggler s;
  s.ranks = {1};
  s.host = w.host;
  s.frame = key;
  s.frame_share = 0.75;
  s.sync_frame = "backward\xe2\x82";
  boost::json::object status{{"rows", boost::json::array{boost::json::object{{"rank", 1}}}}};
  MarkStragglers(status, {s});
  CHECK(ClientParses(status));
}

}  // namespace
}  // namespace dlaunch::launcher
