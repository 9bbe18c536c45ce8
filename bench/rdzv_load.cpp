// rdzv_load: a load generator for the rendezvous coordinator.
//
// It runs past 400 lines: one bench tool with four modes that share their
// option parsing and reporting; the socket-free machine it drives for
// --no-sockets lives in bench/load_sim.hpp, where the tests reach it
// (tests/bench/).
//
//   rdzv_load N [--endpoint HOST:PORT] [--token T] [--run-id ID] [--window W]
//               [--timeout S] [--full-check] [--tables]
//   rdzv_load --max-n            (prints the largest N that fits the fd limit)
//   rdzv_load --codec-cost N     (no sockets: what N assignments cost to build)
//   rdzv_load --no-sockets N [--token T] [--window W]
//                                (no sockets: the coordinator's machine and codec)
//
// --no-sockets N runs bench/load_sim.hpp: N simulated agents through the
// Coordinator and the codec that `dlaunch coordinator` runs (every Hello,
// Challenge, Proof, Join, Assignment, Heartbeat and Done encoded and decoded,
// the handshake checked both ways), each assignment checked, on this one thread.
// It prints one line,
//   seconds=S bytes_per_agent=B n=N join_s=J assign_s=A teardown_s=T frames=F
// where bytes_per_agent is the growth of this process's peak resident size
// (VmHWM, reset through /proc/self/clear_refs first) over the run, divided by N:
// the coordinator's memory at its peak (every Assignment queued at once) and
// the checker's 12 bytes an agent. Exits 1 when an assignment is wrong, an agent
// is refused, or the job does not end with 0 (one line on stderr says why).
//
// One process, one io_context thread. Without --endpoint it hosts a
// CoordinatorServer on 127.0.0.1:0 with min = max = N (the same code a hosting
// dlaunch runs); with it, it joins the coordinator given (which must expect N
// nodes). It then opens N simulated agents, each a real TCP connection doing the
// real handshake: Hello{version, run id, nonce} -> Challenge -> [Proof, with
// --token] -> Join{run id, "sim-i", 127.0.0.1, nproc 1, wants_table 0}, and waits
// for every Assignment. The time measured runs from the first connect until every
// agent has its Assignment, checked: node ranks 0..N-1 each exactly once, and each
// Assignment's one row names the agent, with nnodes = world size = N and rank
// offset = node rank, as a real dlaunch agent without --env azure or --roles gets.
//
// --tables asks for the whole node table instead (what an agent that writes
// TF_CONFIG or Azure ML's hostfile needs: O(N^2) bytes across the job). Then an
// agent reads only the first fields of its Assignment (generation, node rank,
// table length) and skips the rest of the frame without decoding it: real agents
// decode their table on their own machines, and decoding N tables of N nodes here
// would put O(N^2) allocations on this one thread beside the coordinator being
// measured. One table is decoded in full and checked (table[rank].host is the
// agent's own "sim-i"); --full-check decodes every one with FrameDecoder.
//
// At most --window agents (default 1024) are between connect and Challenge at a
// time, so the listen backlog (somaxconn) never overflows: an overflowing backlog
// drops SYNs, and a dropped SYN is retried after a whole second.
//
// --codec-cost N times, with no sockets, the coordinator's share of assigning N
// nodes three ways, and prints one line:
//   rdzv_load codec n=N frame_bytes=B per_agent_s=A encode_once_copy_s=C encode_once_s=O
// per_agent_s: a copy of the Assignment (node table included) per agent, all
// alive at once, then Encode of each (what the coordinator did before one
// SendAssignments action built each agent's as it was written); encode_once_copy_s: one Encode, then per agent a copy
// of the frame with its node rank patched in (4 bytes at a fixed offset); encode_once_s: one Encode and one shared
// frame, each agent getting only its 4-byte rank (e.g. a small prefix frame, or a scatter-gather write of a rank header
// and the shared table).
//
// Prints one line on stdout:
//   rdzv_load n=N seconds=S agents_per_s=R connect_join_s=A assign_s=B
//     bytes_in=BYTES rss_mib=M mode=in-process|endpoint token=0|1
// where connect_join_s runs from the first connect to the last Join sent and
// assign_s from there to the last Assignment received. rss_mib is this process's
// peak RSS (getrusage), coordinator and agents together. Exit 0 on success; 1 on
// a failed run (one line on stderr says why); 2 on a usage error, e.g. an N that
// cannot fit the file descriptor limit.
#include <netinet/in.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "base/defaults.hpp"
#include "bench/load_sim.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/codec.hpp"
#include "rendezvous/connection.hpp"
#include "rendezvous/server.hpp"

namespace {

namespace asio = boost::asio;
namespace rdzv = dlaunch::rendezvous;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;
constexpr std::uint64_t kReservedFds = 64;   // stdio, epoll, the listener, timers, slack
constexpr std::uint8_t kAssignmentType = 5;  // index of Assignment in Message, plus one

[[noreturn]] void Die(int code, const std::string& line) {
  std::fprintf(stderr, "rdzv_load: %s\n", line.c_str());
  std::fflush(stderr);
  _exit(code);
}

// Raises the soft RLIMIT_NOFILE to the hard limit; returns the limit now in force.
std::uint64_t RaiseFdLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  if (rl.rlim_cur < rl.rlim_max) {
    rlimit want = rl;
    want.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) rl = want;
  }
  return rl.rlim_cur == RLIM_INFINITY ? (1ull << 30) : rl.rlim_cur;
}

std::uint64_t MaxAgents(std::uint64_t limit, bool in_process) {
  if (limit <= kReservedFds) return 0;
  return (limit - kReservedFds) / (in_process ? 2 : 1);
}

std::uint32_t BigEndian32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

struct Options {
  long n = 0;
  std::optional<rdzv::HostPort> endpoint;
  std::string token;
  std::string run_id = "rdzv-load";
  long window = 1024;
  double timeout_s = 120;
  bool full_check = false;
  bool tables = false;  // ask for the whole node table, as agents with --env azure or --roles do
  bool max_n = false;
  bool codec_cost = false;
  bool no_sockets = false;
};

Options ParseArgs(int argc, char** argv) {
  Options o;
  auto usage = [](const std::string& why) {
    Die(kExitUsage, why +
                        " (usage: rdzv_load N [--endpoint HOST:PORT] [--token T] [--run-id ID] "
                        "[--window W] [--timeout S] [--full-check] [--tables] | --max-n | --codec-cost N | "
                        "--no-sockets N [--token T] [--window W])");
  };
  auto number = [&](const std::string& flag, const char* text) {
    char* end = nullptr;
    double v = std::strtod(text, &end);
    if (!*text || *end || !(v > 0)) usage(fmt::format("{}: expected a positive number, got '{}'", flag, text));
    return v;
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage(arg + ": missing value");
      return argv[++i];
    };
    if (arg == "--endpoint") {
      auto hp = rdzv::ParseHostPort(value(), dlaunch::base::kDefaultRdzvPort, "--endpoint");
      if (!hp.ok()) usage(hp.status().message());
      o.endpoint = *hp;
    } else if (arg == "--token") {
      o.token = value();
      if (o.token.empty()) usage("--token: empty token");
    } else if (arg == "--run-id") {
      o.run_id = value();
    } else if (arg == "--window") {
      o.window = static_cast<long>(number(arg, value()));
    } else if (arg == "--timeout") {
      o.timeout_s = number(arg, value());
    } else if (arg == "--full-check") {
      o.full_check = true;
    } else if (arg == "--tables") {
      o.tables = true;
    } else if (arg == "--codec-cost") {
      o.codec_cost = true;
    } else if (arg == "--no-sockets") {
      o.no_sockets = true;
    } else if (arg == "--max-n") {
      o.max_n = true;
    } else if (!arg.empty() && arg[0] != '-' && o.n == 0) {
      double v = number("N", arg.c_str());
      if (v != static_cast<long>(v)) usage("N: expected a whole number, got '" + arg + "'");
      o.n = static_cast<long>(v);
    } else {
      usage("unexpected argument '" + arg + "'");
    }
  }
  if (!o.max_n && o.n <= 0) usage("N (the number of agents) is required");
  return o;
}

// --codec-cost: see the top of the file.
int CodecCost(long n) {
  rdzv::Assignment a;
  a.generation = 1;
  for (long i = 0; i < n; ++i) a.nodes.push_back(dlaunch::envmap::Node{fmt::format("sim-{}", i), "127.0.0.1", 1, {}});
  a.master_addr = "127.0.0.1";
  a.master_port = dlaunch::base::kDefaultMasterPort;
  a.run_id = "rdzv-load";
  auto seconds = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  std::size_t bytes = 0;
  // A copy per agent (all alive at once), then one Encode each.
  auto t0 = Clock::now();
  {
    std::vector<rdzv::Message> sends;
    sends.reserve(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i) {
      a.node_rank = static_cast<int>(i);
      sends.emplace_back(a);
    }
    std::vector<std::string> frames;
    frames.reserve(static_cast<std::size_t>(n));
    for (const auto& m : sends) frames.push_back(rdzv::Encode(m));
    bytes = frames.front().size();
  }
  double per_agent = seconds(t0);
  // One Encode, a patched copy per agent.
  t0 = Clock::now();
  {
    a.node_rank = 0;
    std::string shared = rdzv::Encode(a);
    std::vector<std::string> frames;
    frames.reserve(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i) {
      frames.push_back(shared);
      std::uint32_t r = static_cast<std::uint32_t>(i);
      char* p = frames.back().data() + rdzv::kHeaderSize + 4;  // after generation
      p[0] = static_cast<char>(r >> 24), p[1] = static_cast<char>(r >> 16), p[2] = static_cast<char>(r >> 8),
      p[3] = static_cast<char>(r);
    }
  }
  double once_copy = seconds(t0);
  // One Encode, shared.
  t0 = Clock::now();
  {
    auto shared = std::make_shared<const std::string>(rdzv::Encode(a));
    std::vector<std::pair<std::uint32_t, std::shared_ptr<const std::string>>> frames;
    for (long i = 0; i < n; ++i) frames.emplace_back(static_cast<std::uint32_t>(i), shared);
  }
  double once = seconds(t0);
  std::printf("rdzv_load codec n=%ld frame_bytes=%zu per_agent_s=%.6f encode_once_copy_s=%.6f encode_once_s=%.6f\n", n,
              bytes, per_agent, once_copy, once);
  return 0;
}

// A field of /proc/self/status in KiB ("VmHWM"), or -1.
long StatusKiB(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  std::size_t len = std::strlen(field);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, field, len) == 0 && line[len] == ':') kib = std::strtol(line + len + 1, nullptr, 10);
  std::fclose(f);
  return kib;
}

// --no-sockets: see the top of the file.
int NoSockets(const Options& o) {
  rdzv::LoadSimOptions sim;
  sim.agents = static_cast<int>(o.n);
  sim.window = static_cast<int>(o.window);
  if (!o.token.empty()) sim.token = o.token;
  sim.run_id = o.run_id;
  // From here on VmHWM is this run's peak (Linux 4.0+: "5" resets it to VmRSS).
  if (FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
  long before = StatusKiB("VmRSS");
  auto t0 = Clock::now();
  auto result = rdzv::RunLoadSim(sim);
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!result.ok()) Die(kExitFail, result.status().message());
  long peak = StatusKiB("VmHWM");
  double per_agent = before < 0 || peak < 0 ? -1 : static_cast<double>(peak - before) * 1024 / static_cast<double>(o.n);
  std::printf("seconds=%.6f bytes_per_agent=%.0f n=%ld join_s=%.6f assign_s=%.6f teardown_s=%.6f frames=%llu\n",
              seconds, per_agent, o.n, result->join.count(), result->assign.count(), result->teardown.count(),
              static_cast<unsigned long long>(result->frames));
  std::fflush(stdout);
  _exit(0);  // the coordinator's teardown measures nothing
}

class Load;

// One simulated agent: a socket, and a frame parser that skips Assignment payloads.
struct Sim {
  Sim(asio::io_context& io, int index) : sock(io), index(index) {}

  tcp::socket sock;
  int index;
  std::string nonce;
  enum class Phase { kIdle, kConnecting, kHello, kJoined, kAssigned } phase = Phase::kIdle;
  // Frame parsing state.
  unsigned char header[rdzv::kHeaderSize];
  std::size_t header_got = 0;
  std::uint32_t length = 0;
  bool skipping = false;   // an Assignment read in the light way
  unsigned char head[12];  // its generation, node rank, table length
  std::size_t payload_got = 0;
  std::string frame;  // a whole frame to decode (header + payload)
};

class Load {
 public:
  Load(asio::io_context& io, Options options) : io_(io), o_(std::move(options)), deadline_(io) {}

  int Run() {
    if (!o_.endpoint) {
      rdzv::CoordinatorOptions copts;
      copts.endpoint = "127.0.0.1:0";
      copts.run_id = o_.run_id;
      copts.min_nodes = copts.max_nodes = static_cast<int>(o_.n);
      copts.join_timeout = std::chrono::milliseconds(static_cast<long>(o_.timeout_s * 1000));
      copts.handshake_timeout = copts.join_timeout;
      copts.heartbeat_timeout = copts.join_timeout;  // the simulated agents never beat
      copts.token = o_.token;
      auto started = rdzv::CoordinatorServer::Start(io_, rdzv::HostPort{"127.0.0.1", 0}, "rdzv_load",
                                                    rdzv::CoordinatorServer::OneJob(copts),
                                                    [this](const std::string& line) { Log(line); });
      if (!started.ok()) Die(kExitFail, started.status().message());
      server_ = std::move(*started);
      target_ = tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(server_->port()));
    } else {
      boost::system::error_code ec;
      tcp::resolver resolver(io_);
      auto results = resolver.resolve(o_.endpoint->host, std::to_string(o_.endpoint->port), ec);
      if (ec || results.empty())
        Die(kExitFail, fmt::format("--endpoint {}: cannot resolve ({})", o_.endpoint->ToString(), ec.message()));
      target_ = results.begin()->endpoint();
    }
    sims_.reserve(static_cast<std::size_t>(o_.n));
    for (int i = 0; i < o_.n; ++i) sims_.push_back(std::make_unique<Sim>(io_, i));
    rank_owner_.assign(static_cast<std::size_t>(o_.n), -1);
    ranks_.assign(static_cast<std::size_t>(o_.n), -1);
    buf_.resize(1 << 18);

    deadline_.expires_after(std::chrono::milliseconds(static_cast<long>(o_.timeout_s * 1000)));
    deadline_.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      Die(kExitFail, fmt::format("timed out after {}s: {} of {} agents connected, {} joined, {} assigned", o_.timeout_s,
                                 started_, o_.n, joined_, assigned_));
    });

    t0_ = Clock::now();
    Pump();
    io_.run();
    if (assigned_ != o_.n)
      Die(kExitFail, fmt::format("the event loop ran dry with {} of {} agents assigned", assigned_, o_.n));
    return Report();
  }

 private:
  void Log(const std::string& line) {
    // The coordinator's lines go to stderr; a run without trouble prints two or three.
    if (++log_lines_ <= 20) std::fprintf(stderr, "rdzv_load: coordinator: %s\n", line.c_str());
  }

  // Starts agents while fewer than --window are between connect and Challenge.
  void Pump() {
    while (started_ < o_.n && in_flight_ < o_.window) {
      Sim& sim = *sims_[static_cast<std::size_t>(started_++)];
      ++in_flight_;
      sim.phase = Sim::Phase::kConnecting;
      BindSource(sim);
      sim.sock.async_connect(target_, [this, &sim](boost::system::error_code ec) {
        if (ec)
          Die(kExitFail, fmt::format("agent sim-{}: cannot connect to {} ({})", sim.index, Target(), ec.message()));
        OnConnected(sim);
      });
    }
  }

  // Every agent of this one process connects to one address and port, so from
  // one source address the kernel's ephemeral port search in connect()
  // (__inet_hash_connect, __inet_check_established) grows with the connections
  // already open: 80% of this process's time at 19,000 agents, and the reason
  // 19,000 took 9 s where 10,000 took 1 (bench/profile/coordinator.md). Real
  // agents come from many hosts. On loopback, agents spread over 64 source
  // addresses (127.0.0.2-65, all local) with the port left to connect()
  // (IP_BIND_ADDRESS_NO_PORT), so each search sees a sixty-fourth of them.
  void BindSource(Sim& sim) {
    if (!target_.address().is_loopback() || !target_.address().is_v4()) return;
    boost::system::error_code ec;
    sim.sock.open(tcp::v4(), ec);
    if (ec) Die(kExitFail, fmt::format("agent sim-{}: cannot open a socket ({})", sim.index, ec.message()));
    int one = 1;
    setsockopt(sim.sock.native_handle(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    auto source = asio::ip::make_address_v4(0x7f000002u + static_cast<unsigned>(sim.index % 64));
    sim.sock.bind(tcp::endpoint(source, 0), ec);
    if (ec)
      Die(kExitFail, fmt::format("agent sim-{}: cannot bind {} ({})", sim.index, source.to_string(), ec.message()));
  }

  std::string Target() const { return fmt::format("{}:{}", target_.address().to_string(), target_.port()); }

  void Write(Sim& sim, const rdzv::Message& m) {
    boost::system::error_code ec;
    asio::write(sim.sock, asio::buffer(rdzv::Encode(m)), ec);
    if (ec)
      Die(kExitFail, fmt::format("agent sim-{}: cannot send {} ({})", sim.index, rdzv::TypeName(m), ec.message()));
  }

  void OnConnected(Sim& sim) {
    boost::system::error_code ec;
    sim.sock.set_option(tcp::no_delay(true), ec);
    if (!o_.token.empty()) {
      auto nonce = rdzv::RandomNonce();
      if (!nonce.ok()) Die(kExitFail, nonce.status().message());
      sim.nonce = *nonce;
    }
    rdzv::Hello hello;
    hello.run_id = o_.run_id;
    hello.nonce = sim.nonce;
    // The job as a stand-alone coordinator creates it from the first Hello.
    hello.min_nodes = hello.max_nodes = static_cast<int>(o_.n);
    Write(sim, hello);
    sim.phase = Sim::Phase::kHello;
    sim.sock.non_blocking(true, ec);
    WaitRead(sim);
  }

  void WaitRead(Sim& sim) {
    sim.sock.async_wait(tcp::socket::wait_read, [this, &sim](boost::system::error_code ec) {
      if (ec) Die(kExitFail, fmt::format("agent sim-{}: wait failed ({})", sim.index, ec.message()));
      // Drain everything there: the reactor is edge-triggered.
      for (;;) {
        boost::system::error_code rec;
        std::size_t n = sim.sock.read_some(asio::buffer(buf_), rec);
        if (rec == asio::error::would_block || rec == asio::error::try_again) break;
        if (rec) {
          if (sim.phase == Sim::Phase::kAssigned) return;  // the coordinator may close after the job
          Die(kExitFail, fmt::format("agent sim-{}: lost the coordinator before its assignment ({})", sim.index,
                                     rec == asio::error::eof ? "closed by the peer" : rec.message()));
        }
        bytes_in_ += n;
        Consume(sim, reinterpret_cast<const unsigned char*>(buf_.data()), n);
      }
      WaitRead(sim);
    });
  }

  // Splits bytes into frames. An Assignment's payload, unless --full-check, is
  // looked at for its first 12 bytes and skipped; other frames are decoded whole.
  void Consume(Sim& sim, const unsigned char* p, std::size_t n) {
    while (n > 0) {
      if (sim.header_got < rdzv::kHeaderSize) {
        std::size_t take = std::min(n, rdzv::kHeaderSize - sim.header_got);
        std::memcpy(sim.header + sim.header_got, p, take);
        sim.header_got += take;
        p += take;
        n -= take;
        if (sim.header_got < rdzv::kHeaderSize) return;
        if (std::memcmp(sim.header, rdzv::kMagic, 4) != 0 || sim.header[4] != rdzv::kProtocolVersion)
          Die(kExitFail, fmt::format("agent sim-{}: bad frame header from the coordinator", sim.index));
        sim.length = BigEndian32(sim.header + 8);
        sim.payload_got = 0;
        bool assignment = sim.header[5] == kAssignmentType;
        // Without --tables an Assignment holds one row: decoding it costs little.
        sim.skipping = assignment && o_.tables && !o_.full_check && full_chosen_ && sim.length >= 12;
        if (assignment && !sim.skipping) full_chosen_ = true;  // the first one is decoded in full
        if (!sim.skipping) sim.frame.assign(reinterpret_cast<const char*>(sim.header), rdzv::kHeaderSize);
      }
      std::size_t take = std::min<std::size_t>(n, sim.length - sim.payload_got);
      if (sim.skipping) {
        if (sim.payload_got < 12) {
          std::size_t h = std::min<std::size_t>(take, 12 - sim.payload_got);
          std::memcpy(sim.head + sim.payload_got, p, h);
        }
      } else {
        sim.frame.append(reinterpret_cast<const char*>(p), take);
      }
      sim.payload_got += take;
      p += take;
      n -= take;
      if (sim.payload_got < sim.length) return;
      sim.header_got = 0;
      if (sim.skipping) {
        OnLightAssignment(sim);
      } else {
        rdzv::FrameDecoder decoder;
        decoder.Feed(sim.frame);
        std::string().swap(sim.frame);
        auto next = decoder.Next();
        if (!next.ok()) Die(kExitFail, fmt::format("agent sim-{}: {}", sim.index, next.status().message()));
        if (!next->has_value()) Die(kExitFail, fmt::format("agent sim-{}: a frame did not decode", sim.index));
        OnMessage(sim, std::move(**next));
      }
    }
  }

  void OnMessage(Sim& sim, rdzv::Message m) {
    if (auto* c = std::get_if<rdzv::Challenge>(&m)) {
      if (sim.phase != Sim::Phase::kHello) Die(kExitFail, fmt::format("agent sim-{}: a second challenge", sim.index));
      if (!c->nonce.empty()) {
        if (o_.token.empty()) Die(kExitFail, "the coordinator wants a token (--token)");
        // As a real agent does (protocol 3): the coordinator proves the token first.
        if (dlaunch::Status s = rdzv::CheckCoordinatorProof(o_.token, sim.nonce, c->nonce, o_.run_id, c->proof);
            !s.ok())
          Die(kExitFail, fmt::format("agent sim-{}: the coordinator did not prove it holds the token ({})", sim.index,
                                     s.message()));
        Write(sim, rdzv::Proof{rdzv::ProofFor(o_.token, rdzv::Prover::kAgent, sim.nonce, c->nonce, o_.run_id)});
      }
      rdzv::Join join;
      join.run_id = o_.run_id;
      join.host = fmt::format("sim-{}", sim.index);
      join.addrs = {"127.0.0.1"};
      join.nproc = 1;
      join.wants_table = o_.tables ? 1 : 0;
      Write(sim, join);
      sim.phase = Sim::Phase::kJoined;
      if (++joined_ == o_.n) t_joined_ = Clock::now();
      --in_flight_;
      Pump();
    } else if (auto* a = std::get_if<rdzv::Assignment>(&m)) {
      if (!o_.tables) {
        // This agent's row alone: it names the agent, and the numbers place it.
        if (a->nodes.size() != 1 || a->nodes[0].host != fmt::format("sim-{}", sim.index) || a->nnodes != o_.n ||
            a->world_size != o_.n || a->rank_offset != a->node_rank)
          Die(kExitFail, fmt::format("agent sim-{}: a compact assignment with {} rows, host '{}', nnodes {}, world {}, "
                                     "rank offset {} at node rank {}",
                                     sim.index, a->nodes.size(), a->nodes.empty() ? "" : a->nodes[0].host, a->nnodes,
                                     a->world_size, a->rank_offset, a->node_rank));
        if (!decoded_one_) generation_ = a->generation;
        decoded_one_ = true;
        Assigned(sim, a->generation, a->node_rank, static_cast<std::uint32_t>(o_.n));
        return;
      }
      if (static_cast<long>(a->nodes.size()) != o_.n)
        Die(kExitFail,
            fmt::format("agent sim-{}: a node table of {} nodes, expected {}", sim.index, a->nodes.size(), o_.n));
      if (!decoded_one_) {
        decoded_one_ = true;
        hosts_.clear();
        for (const auto& node : a->nodes) {
          if (node.addr != "127.0.0.1" || node.nproc != 1)
            Die(kExitFail, fmt::format("node {} in the table: addr '{}' nproc {}, expected 127.0.0.1 and 1", node.host,
                                       node.addr, node.nproc));
          hosts_.push_back(node.host);
        }
        generation_ = a->generation;
      } else if (a->node_rank >= 0 && a->node_rank < o_.n &&
                 a->nodes[static_cast<std::size_t>(a->node_rank)].host != fmt::format("sim-{}", sim.index)) {
        Die(kExitFail, fmt::format("agent sim-{}: its own row in the node table names {}", sim.index,
                                   a->nodes[static_cast<std::size_t>(a->node_rank)].host));
      }
      Assigned(sim, a->generation, a->node_rank, static_cast<std::uint32_t>(a->nodes.size()));
    } else if (auto* r = std::get_if<rdzv::Refused>(&m)) {
      Die(kExitFail, fmt::format("agent sim-{}: refused ({})", sim.index, r->reason));
    } else if (auto* ab = std::get_if<rdzv::Abort>(&m)) {
      Die(kExitFail, fmt::format("agent sim-{}: aborted ({})", sim.index, ab->reason));
    }
    // Heartbeat answers and the like: nothing to do.
  }

  void OnLightAssignment(Sim& sim) {
    Assigned(sim, static_cast<int>(BigEndian32(sim.head)), static_cast<int>(BigEndian32(sim.head + 4)),
             BigEndian32(sim.head + 8));
  }

  void Assigned(Sim& sim, int generation, int node_rank, std::uint32_t table) {
    if (sim.phase != Sim::Phase::kJoined)
      Die(kExitFail, fmt::format("agent sim-{}: an assignment it was not waiting for", sim.index));
    if (table != static_cast<std::uint32_t>(o_.n))
      Die(kExitFail, fmt::format("agent sim-{}: a node table of {} nodes, expected {}", sim.index, table, o_.n));
    if (generation < 1) Die(kExitFail, fmt::format("agent sim-{}: generation {}", sim.index, generation));
    if (node_rank < 0 || node_rank >= o_.n)
      Die(kExitFail, fmt::format("agent sim-{}: node rank {} out of 0..{}", sim.index, node_rank, o_.n - 1));
    int& owner = rank_owner_[static_cast<std::size_t>(node_rank)];
    if (owner >= 0)
      Die(kExitFail, fmt::format("node rank {} given to both sim-{} and sim-{}", node_rank, owner, sim.index));
    owner = sim.index;
    ranks_[static_cast<std::size_t>(sim.index)] = node_rank;
    generations_.push_back(generation);
    sim.phase = Sim::Phase::kAssigned;
    if (++assigned_ == o_.n) {
      t_end_ = Clock::now();
      deadline_.cancel();
      io_.stop();
    }
  }

  int Report() {
    // The table decoded in full names each agent at its rank.
    if (!decoded_one_) Die(kExitFail, "no assignment was decoded in full");
    for (long i = 0; o_.tables && i < o_.n; ++i) {
      int rank = ranks_[static_cast<std::size_t>(i)];
      if (hosts_[static_cast<std::size_t>(rank)] != fmt::format("sim-{}", i))
        Die(kExitFail, fmt::format("sim-{} has node rank {}, but the table names {} there", i, rank,
                                   hosts_[static_cast<std::size_t>(rank)]));
    }
    for (int g : generations_)
      if (g != generation_) Die(kExitFail, "assignments of different generations");
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    double seconds = std::chrono::duration<double>(t_end_ - t0_).count();
    double join_s = std::chrono::duration<double>(t_joined_ - t0_).count();
    std::printf(
        "rdzv_load n=%ld seconds=%.6f agents_per_s=%.0f connect_join_s=%.6f assign_s=%.6f bytes_in=%llu "
        "rss_mib=%.1f mode=%s token=%d tables=%d\n",
        o_.n, seconds, o_.n / seconds, join_s, seconds - join_s, static_cast<unsigned long long>(bytes_in_),
        ru.ru_maxrss / 1024.0, o_.endpoint ? "endpoint" : "in-process", o_.token.empty() ? 0 : 1, o_.tables ? 1 : 0);
    std::fflush(stdout);
    // Tearing down N connections and the coordinator's copies of the table
    // measures nothing: leave it to the kernel.
    _exit(0);
  }

  asio::io_context& io_;
  Options o_;
  asio::steady_timer deadline_;
  std::unique_ptr<rdzv::CoordinatorServer> server_;
  tcp::endpoint target_;
  std::vector<std::unique_ptr<Sim>> sims_;
  std::vector<char> buf_;
  long started_ = 0, in_flight_ = 0, joined_ = 0, assigned_ = 0;
  int log_lines_ = 0;
  std::uint64_t bytes_in_ = 0;
  bool decoded_one_ = false;
  bool full_chosen_ = false;
  int generation_ = 0;
  std::vector<std::string> hosts_;
  std::vector<int> rank_owner_, ranks_, generations_;
  Clock::time_point t0_, t_joined_, t_end_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o = ParseArgs(argc, argv);
  std::uint64_t limit = RaiseFdLimit();
  bool in_process = !o.endpoint;
  std::uint64_t fit = MaxAgents(limit, in_process);
  if (o.codec_cost) return CodecCost(o.n);
  if (o.no_sockets) return NoSockets(o);
  if (o.max_n) {
    std::printf("%llu\n", static_cast<unsigned long long>(fit));
    return 0;
  }
  if (static_cast<std::uint64_t>(o.n) > fit)
    Die(kExitUsage,
        fmt::format("N={} agents need {} file descriptors ({} per agent{} plus {} reserved), but RLIMIT_NOFILE is "
                    "{} (raised to its hard limit); the largest N that fits is {}",
                    o.n, static_cast<std::uint64_t>(o.n) * (in_process ? 2 : 1) + kReservedFds, in_process ? 2 : 1,
                    in_process ? ", both ends in this process" : "", kReservedFds, limit, fit));
  asio::io_context io(1);
  Load load(io, std::move(o));
  return load.Run();
}
