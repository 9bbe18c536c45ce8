// The codec is written by hand. No Debian-packaged library gives a small framed
// binary codec with a hard size cap and a precise reason for each rejection:
// Boost.Serialization trusts its input and is not a wire format, and protobuf or
// flatbuffers would add a code generator for thirteen small structs. One field list
// per message (Fields below) drives encoding, sizing and decoding, so the three
// cannot drift apart.
#include "rendezvous/codec.hpp"

#include <array>
#include <concepts>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

namespace dlaunch::rendezvous {
namespace {

constexpr std::array<std::string_view, std::variant_size_v<Message>> kTypeNames = {
    "hello", "challenge", "proof", "join",    "assignment", "heartbeat", "worker-failed",
    "abort", "done",      "leave", "refused", "query",      "report",    "standby"};

std::uint32_t LoadU32(const char* p) {
  auto b = [p](int i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])); };
  return b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
}

void StoreU32(std::uint32_t v, char* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (24 - 8 * i) & 0xff);
}

std::string Hex(std::string_view bytes) {
  std::string out = "0x";
  for (char c : bytes) out += fmt::format("{:02x}", static_cast<unsigned char>(c));
  return out;
}

// ---- The field list of every message, shared by Writer, Sizer and Reader. ----

template <typename M, typename T>
concept Is = std::same_as<std::remove_const_t<M>, T>;

template <typename V, Is<Hello> M>
void Fields(V& v, M& m) {
  v.Int("version", m.version);
  v.Str("run_id", m.run_id);
  v.Str("nonce", m.nonce);
  v.Int("min_nodes", m.min_nodes);
  v.Int("max_nodes", m.max_nodes);
  v.Int("max_restarts", m.max_restarts);
  v.Int("hang_timeout_ms", m.hang_timeout_ms);
  v.Int("hang_stop", m.hang_stop);
  v.Int("spares", m.spares);
  v.Int("max_no_progress_restarts", m.max_no_progress_restarts);
  v.Int("backoff_min_ms", m.backoff_min_ms);
  v.Int("backoff_max_ms", m.backoff_max_ms);
}
template <typename V, Is<Challenge> M>
void Fields(V& v, M& m) {
  v.Str("nonce", m.nonce);
  v.Str("proof", m.proof);
}
template <typename V, Is<Proof> M>
void Fields(V& v, M& m) {
  v.Str("mac", m.mac);
}
template <typename V, Is<Join> M>
void Fields(V& v, M& m) {
  v.Str("run_id", m.run_id);
  v.Str("host", m.host);
  v.List("addrs", m.addrs, [](V& v, auto& addr) { v.Str("addrs", addr); });
  v.Int("nproc", m.nproc);
  v.Int("gpus", m.gpus);
  v.Int("requested_node_rank", m.requested_node_rank);
  v.Int("list_position", m.list_position);
  v.Int("master_port_hint", m.master_port_hint);
  v.List("task_ports", m.task_ports, [](V& v, auto& port) { v.Int("task_ports", port); });
  v.Int("wants_table", m.wants_table);
}
template <typename V, Is<Assignment> M>
void Fields(V& v, M& m) {
  v.Int("generation", m.generation);
  v.Int("node_rank", m.node_rank);
  v.List("nodes", m.nodes, [](V& v, auto& node) {
    v.Str("nodes.host", node.host);
    v.Str("nodes.addr", node.addr);
    v.Int("nodes.nproc", node.nproc);
    v.List("nodes.task_ports", node.task_ports, [](V& v, auto& port) { v.Int("nodes.task_ports", port); });
  });
  v.Str("master_addr", m.master_addr);
  v.Int("master_port", m.master_port);
  v.Str("run_id", m.run_id);
  v.Int("restart_count", m.restart_count);
  v.Int("nnodes", m.nnodes);
  v.Int("rank_offset", m.rank_offset);
  v.Int("world_size", m.world_size);
}
template <typename V, Is<Heartbeat> M>
void Fields(V& v, M& m) {
  v.Int("silent_ms", m.silent_ms);
  v.List("progress", m.progress, [](V& v, auto& value) { v.Int64("progress", value); });
}
template <typename V, Is<WorkerFailed> M>
void Fields(V& v, M& m) {
  v.Int("generation", m.generation);
  v.Int("node_rank", m.node_rank);
  v.Int("rank", m.rank);
  v.Int("code", m.code);
  v.Str("reason", m.reason);
}
template <typename V, Is<Abort> M>
void Fields(V& v, M& m) {
  v.Str("reason", m.reason);
  v.Int("code", m.code);
}
template <typename V, Is<Done> M>
void Fields(V& v, M& m) {
  v.Int("generation", m.generation);
  v.Int("node_rank", m.node_rank);
  v.Int("exit_code", m.exit_code);
}
template <typename V, Is<Leave> M>
void Fields(V& v, M& m) {
  v.Int("node_rank", m.node_rank);
}
template <typename V, Is<Refused> M>
void Fields(V& v, M& m) {
  v.Str("reason", m.reason);
}
template <typename V, Is<Query> M>
void Fields(V& v, M& m) {
  v.Int("id", m.id);
  v.Str("what", m.what);
}
template <typename V, Is<Report> M>
void Fields(V& v, M& m) {
  v.Int("id", m.id);
  v.Int("node_rank", m.node_rank);
  v.List("items", m.items, [](V& v, auto& item) { v.Str("items", item); });
}
template <typename V, Is<Standby> M>
void Fields(V& v, M& m) {
  v.Int("generation", m.generation);
  v.Str("reason", m.reason);
}

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void Int(const char*, int v) { U32(static_cast<std::uint32_t>(v)); }
  void Int64(const char*, std::int64_t v) {
    U32(static_cast<std::uint32_t>(static_cast<std::uint64_t>(v) >> 32));
    U32(static_cast<std::uint32_t>(static_cast<std::uint64_t>(v)));
  }
  // Only called for messages that passed CheckEncodable: nothing is cut.
  void Str(const char*, const std::string& s) {
    U32(static_cast<std::uint32_t>(s.size()));
    out_.append(s);
  }
  template <typename T, typename F>
  void List(const char*, const std::vector<T>& items, F item) {
    U32(static_cast<std::uint32_t>(items.size()));
    for (const T& x : items) item(*this, x);
  }

 private:
  void U32(std::uint32_t v) {
    char b[4];
    StoreU32(v, b);
    out_.append(b, 4);
  }
  std::string& out_;
};

// Sizes a message and finds the first field over its cap (the same caps Reader
// enforces, so whatever is encoded also decodes).
class Sizer {
 public:
  explicit Sizer(std::string_view message) : message_(message) {}
  void Int(const char*, int) { size += 4; }
  void Int64(const char*, std::int64_t) { size += 8; }
  void Str(const char* name, const std::string& s) {
    size += 4 + s.size();
    if (s.size() > kMaxString && status.ok()) {
      status = Status::InvalidArgument(fmt::format("frame: string '{}' of {} is {} bytes, over its cap of {}", name,
                                                   message_, s.size(), kMaxString));
    }
  }
  template <typename T, typename F>
  void List(const char* name, const std::vector<T>& items, F item) {
    size += 4;
    if (items.size() > kMaxListItems && status.ok()) {
      status = Status::InvalidArgument(fmt::format("frame: list '{}' of {} has {} items, over its cap of {}", name,
                                                   message_, items.size(), kMaxListItems));
    }
    for (const T& x : items) item(*this, x);
  }
  std::size_t size = 0;
  Status status;

 private:
  std::string_view message_;
};

// Reads fields in order; the first problem is kept and every later read is a no-op.
class Reader {
 public:
  Reader(std::string_view data, std::string_view message) : data_(data), message_(message) {}

  void Int(const char* name, int& v) {
    if (!Need(name, 4)) return;
    v = static_cast<int>(LoadU32(data_.data() + pos_));
    pos_ += 4;
  }
  void Int64(const char* name, std::int64_t& v) {
    if (!Need(name, 8)) return;
    std::uint64_t high = LoadU32(data_.data() + pos_), low = LoadU32(data_.data() + pos_ + 4);
    v = static_cast<std::int64_t>(high << 32 | low);
    pos_ += 8;
  }
  void Str(const char* name, std::string& s) {
    std::uint32_t n = 0;
    if (!Count(name, n)) return;
    if (n > kMaxString) {
      return Fail(
          fmt::format("frame: string '{}' of {} is {} bytes, over its cap of {}", name, message_, n, kMaxString));
    }
    if (!Need(name, n)) return;
    s.assign(data_.substr(pos_, n));
    pos_ += n;
  }
  template <typename T, typename F>
  void List(const char* name, std::vector<T>& items, F item) {
    std::uint32_t n = 0;
    if (!Count(name, n)) return;
    if (n > kMaxListItems) {
      return Fail(
          fmt::format("frame: list '{}' of {} has {} items, over its cap of {}", name, message_, n, kMaxListItems));
    }
    // No reserve(n): items are added only as their bytes arrive, so a lying count
    // costs no more memory than the payload itself.
    items.clear();
    for (std::uint32_t i = 0; i < n && status_.ok(); ++i) item(*this, items.emplace_back());
  }

  Status Finish() {
    if (status_.ok() && pos_ != data_.size()) {
      Fail(fmt::format("frame: {} trailing bytes after the last field of {}", data_.size() - pos_, message_));
    }
    return status_;
  }

 private:
  bool Count(const char* name, std::uint32_t& n) {
    if (!Need(name, 4)) return false;
    n = LoadU32(data_.data() + pos_);
    pos_ += 4;
    return true;
  }
  bool Need(const char* name, std::size_t n) {
    if (!status_.ok()) return false;
    if (data_.size() - pos_ >= n) return true;
    Fail(fmt::format("frame: truncated field '{}' of {}", name, message_));
    return false;
  }
  void Fail(std::string msg) { status_ = Status::InvalidArgument(std::move(msg)); }

  std::string_view data_;
  std::string_view message_;
  std::size_t pos_ = 0;
  Status status_;
};

// Checks whatever prefix of a header is there, so garbage is refused early.
Status CheckHeader(std::string_view h) {
  std::string_view magic(kMagic, 4);
  std::size_t have = std::min<std::size_t>(h.size(), 4);
  if (h.substr(0, have) != magic.substr(0, have)) {
    return Status::InvalidArgument(
        fmt::format("frame: bad magic {} (expected {})", Hex(h.substr(0, have)), Hex(magic)));
  }
  if (h.size() > 4 && static_cast<std::uint8_t>(h[4]) != kProtocolVersion) {
    return Status::InvalidArgument(
        fmt::format("{} {} (expected {})", kVersionProblem, static_cast<unsigned char>(h[4]), kProtocolVersion));
  }
  if (h.size() > 5) {
    unsigned type = static_cast<unsigned char>(h[5]);
    if (type == 0 || type > std::variant_size_v<Message>) {
      return Status::InvalidArgument(fmt::format("frame: unknown type {}", type));
    }
  }
  if (h.size() >= 8 && (h[6] != 0 || h[7] != 0)) {
    return Status::InvalidArgument(fmt::format("frame: reserved bits set ({})", Hex(h.substr(6, 2))));
  }
  if (h.size() >= kHeaderSize) {
    std::uint32_t length = LoadU32(h.data() + 8);
    if (length > kMaxPayload) {
      return Status::InvalidArgument(fmt::format("frame: payload length {} over the cap of {}", length, kMaxPayload));
    }
  }
  return Status::Ok();
}

template <std::size_t... I>
Message Empty(std::size_t index, std::index_sequence<I...>) {
  Message m;
  ((index == I ? (void)m.emplace<I>() : void()), ...);
  return m;
}

}  // namespace

bool operator==(const Assignment& a, const Assignment& b) {
  auto same_node = [](const envmap::Node& x, const envmap::Node& y) {
    return x.host == y.host && x.addr == y.addr && x.nproc == y.nproc && x.task_ports == y.task_ports;
  };
  return a.generation == b.generation && a.node_rank == b.node_rank &&
         std::equal(a.nodes.begin(), a.nodes.end(), b.nodes.begin(), b.nodes.end(), same_node) &&
         a.master_addr == b.master_addr && a.master_port == b.master_port && a.run_id == b.run_id &&
         a.restart_count == b.restart_count && a.nnodes == b.nnodes && a.rank_offset == b.rank_offset &&
         a.world_size == b.world_size;
}

std::uint8_t TypeOf(const Message& message) { return static_cast<std::uint8_t>(message.index() + 1); }

std::string_view TypeName(const Message& message) { return kTypeNames[message.index()]; }

std::size_t PayloadSize(const Message& message) {
  Sizer sizer(TypeName(message));
  std::visit([&](const auto& m) { Fields(sizer, m); }, message);
  return sizer.size;
}

Status CheckEncodable(const Message& message) {
  Sizer sizer(TypeName(message));
  std::visit([&](const auto& m) { Fields(sizer, m); }, message);
  if (!sizer.status.ok()) return sizer.status;
  if (sizer.size > kMaxPayload) {
    return Status::InvalidArgument(
        fmt::format("frame: {} payload of {} bytes over the cap of {}", TypeName(message), sizer.size, kMaxPayload));
  }
  return Status::Ok();
}

std::string Encode(const Message& message) {
  if (Status s = CheckEncodable(message); !s.ok()) throw std::length_error(s.message());
  std::string out(kMagic, 4);
  out += static_cast<char>(kProtocolVersion);
  out += static_cast<char>(TypeOf(message));
  out.append(6, '\0');  // reserved, then the length, patched below
  Writer writer(out);
  std::visit([&](const auto& m) { Fields(writer, m); }, message);
  std::size_t length = out.size() - kHeaderSize;
  StoreU32(static_cast<std::uint32_t>(length), out.data() + 8);
  return out;
}

void FrameDecoder::Feed(std::string_view bytes) {
  if (!error_.ok()) return;
  buffer_.append(bytes);
}

Result<std::optional<Message>> FrameDecoder::Next() {
  if (!error_.ok()) return error_;
  std::string_view rest = std::string_view(buffer_).substr(pos_);
  error_ = CheckHeader(rest.substr(0, kHeaderSize));
  if (!error_.ok()) {
    buffer_.clear();
    pos_ = 0;
    return error_;
  }
  if (rest.size() < kHeaderSize) return std::optional<Message>();
  std::size_t length = LoadU32(rest.data() + 8);
  if (rest.size() < kHeaderSize + length) return std::optional<Message>();

  std::size_t index = static_cast<unsigned char>(rest[5]) - 1u;
  Message message = Empty(index, std::make_index_sequence<std::variant_size_v<Message>>());
  Reader reader(rest.substr(kHeaderSize, length), kTypeNames[index]);
  std::visit([&](auto& m) { Fields(reader, m); }, message);
  error_ = reader.Finish();
  if (!error_.ok()) {
    buffer_.clear();
    pos_ = 0;
    return error_;
  }
  pos_ += kHeaderSize + length;
  // Drop consumed bytes once they are the larger part, so the buffer stays bounded
  // without moving memory after every small frame.
  // Once empty it holds no memory either: a coordinator keeps a decoder per agent,
  // and one large Report must not stay allocated for the connection's life.
  if (pos_ == buffer_.size()) {
    std::string().swap(buffer_);
    pos_ = 0;
  } else if (pos_ > buffer_.size() / 2) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  return std::optional<Message>(std::move(message));
}

}  // namespace dlaunch::rendezvous
