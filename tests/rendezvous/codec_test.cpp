#include "rendezvous/codec.hpp"

#include <stdexcept>

#include <limits>

#include <catch2/catch.hpp>

namespace dlaunch::rendezvous {
namespace {

// One of every message, with values that exercise signs, empty and binary strings.
std::vector<Message> EveryMessage() {
  Join join;
  join.run_id = "job42";
  join.host = "gpu-a";
  join.addrs = {"10.0.0.1", "fe80::1"};
  join.nproc = 8;
  join.gpus = 8;
  join.requested_node_rank = 2;
  join.list_position = -1;
  join.master_port_hint = 29500;
  join.task_ports = {2000, 2001, 2002, 2003, 2004, 2005, 2006, 2007};
  join.wants_table = 0;
  Assignment assignment;
  assignment.generation = 3;
  assignment.node_rank = 1;
  assignment.nodes = {{"a", "10.0.0.1", 2, {2000, 2001}}, {"b", "10.0.0.2", 3, {}}};
  assignment.master_addr = "10.0.0.1";
  assignment.master_port = 29500;
  assignment.run_id = "job42";
  assignment.restart_count = 2;
  assignment.nnodes = 2;
  assignment.rank_offset = 2;
  assignment.world_size = 5;
  return {
      Hello{kProtocolVersion, "job42", std::string("\0\x01\xff nonce", 9), 2, 4, 3, 1'800'000, 1, 2, 3, 10'000,
            300'000},
      Challenge{std::string(32, '\x7f'), std::string(32, '\x01')},
      Challenge{""},
      Proof{std::string(32, '\0')},
      join,
      Join{},
      assignment,
      Assignment{},
      Heartbeat{},
      Heartbeat{65'000},
      // Progress past 2^31 (a token count), none written (-1), and the extremes.
      Heartbeat{
          0,
          {0, -1, 4'000'000'000, std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min()}},
      WorkerFailed{3, 1, 9, 137, "was killed by SIGKILL"},
      Abort{"rendezvous head:29400: node 1 (b) rank 9 was killed by SIGKILL", 137},
      Done{3, 1, 0},
      Done{1, -1, 0},
      Leave{2},
      Refused{"rendezvous head:29400: wrong token (proof does not match)"},
      Query{7, "stacks"},
      Query{},
      Report{7, 1, {R"({"rank":2,"pid":42})", R"({"rank":3,"pid":43})"}},
      Report{},
      Standby{4, "rendezvous head:29400: node 2 (c) lost (connection closed); restart 1 of 3 waits"},
      Standby{},
  };
}

Message DecodeOne(const std::string& bytes) {
  FrameDecoder decoder;
  decoder.Feed(bytes);
  Result<std::optional<Message>> next = decoder.Next();
  REQUIRE(next.ok());
  REQUIRE(next->has_value());
  CHECK(decoder.buffered() == 0);
  return std::move(**next);
}

std::string U32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16 & 0xff), static_cast<char>(v >> 8 & 0xff),
          static_cast<char>(v & 0xff)};
}
std::string Str(const std::string& s) { return U32(static_cast<std::uint32_t>(s.size())) + s; }

// A frame with a hand-made payload: type by wire number.
std::string Frame(std::uint8_t type, const std::string& payload) {
  std::string f = "DLRV";
  f += static_cast<char>(kProtocolVersion);
  f += static_cast<char>(type);
  f += std::string(2, '\0');
  return f + U32(static_cast<std::uint32_t>(payload.size())) + payload;
}

std::string ErrorOf(const std::string& bytes) {
  FrameDecoder decoder;
  decoder.Feed(bytes);
  Result<std::optional<Message>> next = decoder.Next();
  REQUIRE_FALSE(next.ok());
  CHECK(next.status().code() == Code::kInvalidArgument);
  return next.status().message();
}

constexpr std::uint8_t kHelloType = 1, kJoinType = 4, kAssignmentType = 5, kHeartbeatType = 6, kAbortType = 8,
                       kLeaveType = 10, kReportType = 13;

}  // namespace

TEST_CASE("every message round-trips through Encode and FrameDecoder", "[codec]") {
  for (const Message& m : EveryMessage()) {
    INFO(TypeName(m));
    std::string frame = Encode(m);
    CHECK(frame.substr(0, 4) == "DLRV");
    CHECK(static_cast<std::uint8_t>(frame[5]) == TypeOf(m));
    CHECK(frame.size() == kHeaderSize + PayloadSize(m));
    Message back = DecodeOne(frame);
    CHECK(back.index() == m.index());
    CHECK(back == m);
  }
}

TEST_CASE("type numbers and names are fixed", "[codec]") {
  static const struct {
    Message message;
    int type;
    const char* name;
  } kCases[] = {
      {Hello{}, 1, "hello"},
      {Challenge{}, 2, "challenge"},
      {Proof{}, 3, "proof"},
      {Join{}, 4, "join"},
      {Assignment{}, 5, "assignment"},
      {Heartbeat{}, 6, "heartbeat"},
      {WorkerFailed{}, 7, "worker-failed"},
      {Abort{}, 8, "abort"},
      {Done{}, 9, "done"},
      {Leave{}, 10, "leave"},
      {Refused{}, 11, "refused"},
      {Query{}, 12, "query"},
      {Report{}, 13, "report"},
  };
  for (const auto& c : kCases) {
    CHECK(TypeOf(c.message) == c.type);
    CHECK(TypeName(c.message) == c.name);
  }
}

TEST_CASE("the wire layout of a frame is big-endian and length-prefixed", "[codec]") {
  std::string frame = Encode(Leave{258});
  CHECK(frame == std::string("DLRV\x05\x0a\x00\x00\x00\x00\x00\x04\x00\x00\x01\x02", 16));
  CHECK(Encode(Abort{"ab", -1}) == Frame(kAbortType, Str("ab") + std::string(4, '\xff')));
}

TEST_CASE("frames fed one byte at a time come out whole and in order", "[codec]") {
  std::string stream;
  for (const Message& m : EveryMessage()) stream += Encode(m);
  FrameDecoder decoder;
  std::vector<Message> out;
  for (char c : stream) {
    decoder.Feed(std::string_view(&c, 1));
    for (;;) {
      Result<std::optional<Message>> next = decoder.Next();
      REQUIRE(next.ok());
      if (!next->has_value()) break;
      out.push_back(std::move(**next));
    }
  }
  REQUIRE(out.size() == EveryMessage().size());
  CHECK(out == EveryMessage());
  CHECK(decoder.buffered() == 0);
}

TEST_CASE("several frames in one read are all returned, then nullopt", "[codec]") {
  FrameDecoder decoder;
  decoder.Feed(Encode(Heartbeat{}) + Encode(Leave{1}) + Encode(Heartbeat{}).substr(0, 5));
  CHECK(decoder.Next()->value() == Message(Heartbeat{}));
  CHECK(decoder.Next()->value() == Message(Leave{1}));
  Result<std::optional<Message>> partial = decoder.Next();
  REQUIRE(partial.ok());
  CHECK_FALSE(partial->has_value());
  CHECK(decoder.buffered() == 5);
}

TEST_CASE("every malformed frame class is rejected with its own reason", "[codec]") {
  std::string too_many = U32(kMaxListItems + 1);
  static const struct {
    const char* what;
    std::string bytes;
    const char* reason;
  } kCases[] = {
      {"http", "GET / HTTP/1.1\r\n", "frame: bad magic 0x47455420 (expected 0x444c5256)"},
      {"one wrong byte", "X", "frame: bad magic 0x58 (expected 0x444c5256)"},
      {"wrong version", std::string("DLRV\x01\x01", 6), "frame: unsupported version 1 (expected 5)"},
      {"type zero", std::string("DLRV\x05\x00", 6), "frame: unknown type 0"},
      {"type too large", std::string("DLRV\x05\x63", 6), "frame: unknown type 99"},
      {"reserved bits", std::string("DLRV\x05\x06\x00\x01", 8), "frame: reserved bits set (0x0001)"},
      {"oversized", std::string("DLRV\x05\x06\x00\x00", 8) + U32(kMaxPayload + 1),
       "frame: payload length 1048577 over the cap of 1048576"},
      {"truncated int", Frame(kLeaveType, std::string("\x00\x01", 2)), "frame: truncated field 'node_rank' of leave"},
      {"truncated string", Frame(kHelloType, U32(1) + U32(5) + "job"), "frame: truncated field 'run_id' of hello"},
      {"missing field", Frame(kHelloType, U32(1) + Str("job")), "frame: truncated field 'nonce' of hello"},
      {"truncated node", Frame(kAssignmentType, U32(1) + U32(0) + U32(1) + Str("a")),
       "frame: truncated field 'nodes.addr' of assignment"},
      {"trailing", Frame(kLeaveType, U32(1) + "xyz"), "frame: 3 trailing bytes after the last field of leave"},
      {"trailing heartbeat", Frame(kHeartbeatType, U32(0) + U32(0) + "x"),
       "frame: 1 trailing bytes after the last field of heartbeat"},
      {"protocol 3's heartbeat", Frame(kHeartbeatType, ""), "frame: truncated field 'silent_ms' of heartbeat"},
      {"protocol 4's heartbeat", Frame(kHeartbeatType, U32(0)), "frame: truncated field 'progress' of heartbeat"},
      {"truncated progress", Frame(kHeartbeatType, U32(0) + U32(1) + U32(0)),
       "frame: truncated field 'progress' of heartbeat"},
      {"type past standby", std::string("DLRV\x05\x0f", 6), "frame: unknown type 15"},
      {"long report item",
       Frame(kReportType, U32(1) + U32(0) + U32(1) + U32(kMaxString + 1) + std::string(kMaxString + 1, '{')),
       "frame: string 'items' of report is 4097 bytes, over its cap of 4096"},
      {"lying report count", Frame(kReportType, U32(1) + U32(0) + U32(3) + Str("{}")),
       "frame: truncated field 'items' of report"},
      {"long string", Frame(kJoinType, Str("job") + U32(kMaxString + 1) + std::string(kMaxString + 1, 'h')),
       "frame: string 'host' of join is 4097 bytes, over its cap of 4096"},
      {"long list", Frame(kJoinType, Str("job") + Str("a") + too_many),
       "frame: list 'addrs' of join has 65537 items, over its cap of 65536"},
      {"lying list count", Frame(kJoinType, Str("job") + Str("a") + U32(1000) + Str("10.0.0.1")),
       "frame: truncated field 'addrs' of join"},
  };
  for (const auto& c : kCases) {
    INFO(c.what);
    CHECK(ErrorOf(c.bytes) == c.reason);
  }
}

TEST_CASE("an oversized length is refused from the header alone", "[codec]") {
  FrameDecoder decoder;
  decoder.Feed(std::string("DLRV\x05\x07\x00\x00", 8) + U32(0xffffffff));
  Result<std::optional<Message>> next = decoder.Next();
  REQUIRE_FALSE(next.ok());
  CHECK(next.status().message() == "frame: payload length 4294967295 over the cap of 1048576");
  CHECK(decoder.buffered() == 0);  // nothing kept, nothing waited for
}

TEST_CASE("garbage is refused at its first byte, before a header is complete", "[codec]") {
  FrameDecoder decoder;
  decoder.Feed("D");
  CHECK(decoder.Next().ok());
  decoder.Feed("Lx");
  CHECK(decoder.Next().status().message() == "frame: bad magic 0x444c78 (expected 0x444c5256)");
}

TEST_CASE("a decoder error is final", "[codec]") {
  FrameDecoder decoder;
  decoder.Feed(std::string("DLRV\x09", 5));
  CHECK_FALSE(decoder.Next().ok());
  decoder.Feed(Encode(Heartbeat{}));
  Result<std::optional<Message>> again = decoder.Next();
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().message() == "frame: unsupported version 9 (expected 5)");
  CHECK(decoder.buffered() == 0);
}

TEST_CASE("a payload at exactly the cap is accepted", "[codec]") {
  // An Abort whose reason fills the cap would need a string over kMaxString, so
  // build a Join whose addresses fill it instead.
  Join join;
  join.run_id = "j";
  join.host = "h";
  std::size_t fixed = PayloadSize(join);
  std::size_t per_addr = 4 + kMaxString;
  std::size_t n = (kMaxPayload - fixed) / per_addr;
  join.addrs.assign(n, std::string(kMaxString, 'a'));
  std::size_t rest = kMaxPayload - PayloadSize(join);
  REQUIRE(rest >= 4);
  join.addrs.push_back(std::string(rest - 4, 'b'));
  REQUIRE(PayloadSize(join) == kMaxPayload);
  CHECK(DecodeOne(Encode(join)) == Message(join));
  join.addrs.back() += "c";
  CHECK_THROWS_AS(Encode(join), std::length_error);
}

TEST_CASE("Encode never truncates: a string over its cap is an error the caller sees first", "[codec]") {
  Abort abort{std::string(kMaxString + 100, 'r'), 1};
  Status s = CheckEncodable(abort);
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK(s.message() == "frame: string 'reason' of abort is 4196 bytes, over its cap of 4096");
  CHECK_THROWS_AS(Encode(abort), std::length_error);
  Hello hello{kProtocolVersion, std::string(5000, 'j'), ""};
  CHECK(CheckEncodable(hello).message() == "frame: string 'run_id' of hello is 5000 bytes, over its cap of 4096");
  // At the cap it encodes and decodes whole.
  abort.reason.resize(kMaxString);
  CHECK(CheckEncodable(abort).ok());
  CHECK(DecodeOne(Encode(abort)) == Message(abort));
  for (const Message& m : EveryMessage()) CHECK(CheckEncodable(m).ok());
}

}  // namespace dlaunch::rendezvous
