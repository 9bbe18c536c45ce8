#include "bench/load_sim.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "rendezvous/auth.hpp"
#include "rendezvous/coordinator.hpp"

namespace dlaunch::rendezvous {

AssignmentChecker::AssignmentChecker(int n)
    : n_(n), agent_of_rank_(static_cast<std::size_t>(n), -1), offset_of_rank_(static_cast<std::size_t>(n), 0) {
  for (int i = 0; i < n; ++i) workers_ += NprocOf(i);
}

std::string AssignmentChecker::HostOf(int agent) { return fmt::format("sim-{}", agent); }
int AssignmentChecker::NprocOf(int agent) { return 1 + agent % 4; }

Status AssignmentChecker::Add(int agent, const Assignment& a) {
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(fmt::format("agent {}: {}", HostOf(agent), what));
  };
  if (agent < 0 || agent >= n_) return bad(fmt::format("not one of the {} agents", n_));
  if (first_) {
    first_ = false;
    generation_ = a.generation;
    master_addr_ = a.master_addr;
    master_port_ = a.master_port;
  }
  if (a.generation != generation_ || a.generation < 1)
    return bad(fmt::format("generation {}, the others {}", a.generation, generation_));
  if (a.master_addr != master_addr_ || a.master_port != master_port_)
    return bad(fmt::format("master {}:{}, the others {}:{}", a.master_addr, a.master_port, master_addr_, master_port_));
  if (a.nnodes != n_) return bad(fmt::format("nnodes {}, expected {}", a.nnodes, n_));
  if (a.world_size != workers_) return bad(fmt::format("world size {}, expected {}", a.world_size, workers_));
  if (a.node_rank < 0 || a.node_rank >= n_) return bad(fmt::format("node rank {} outside 0..{}", a.node_rank, n_ - 1));
  if (a.nodes.size() != 1 || a.nodes[0].host != HostOf(agent) || a.nodes[0].nproc != NprocOf(agent))
    return bad(fmt::format("{} rows, the first '{}' with nproc {}; expected only its own", a.nodes.size(),
                           a.nodes.empty() ? "" : a.nodes[0].host, a.nodes.empty() ? 0 : a.nodes[0].nproc));
  auto rank = static_cast<std::size_t>(a.node_rank);
  if (agent_of_rank_[rank] >= 0)
    return bad(fmt::format("node rank {} was already given to {}", a.node_rank, HostOf(agent_of_rank_[rank])));
  agent_of_rank_[rank] = agent;
  offset_of_rank_[rank] = a.rank_offset;
  return Status::Ok();
}

Status AssignmentChecker::Finish() const {
  // n distinct ranks in 0..n-1 make every rank given exactly once.
  std::int64_t offset = 0;
  for (std::size_t r = 0; r < agent_of_rank_.size(); ++r) {
    int agent = agent_of_rank_[r];
    if (agent < 0) return Status::InvalidArgument(fmt::format("node rank {} was given to no agent", r));
    if (offset_of_rank_[r] != offset)
      return Status::InvalidArgument(fmt::format("agent {}: rank offset {} at node rank {}, expected {}", HostOf(agent),
                                                 offset_of_rank_[r], r, offset));
    offset += NprocOf(agent);
  }
  return Status::Ok();
}

namespace {

// The server ticks its jobs every 50ms (server.hpp's kTickPeriod).
constexpr std::chrono::milliseconds kSimTick{50};

// One agent between Hello and Join: the coordinator's lobby state and the agent's.
struct Shaking {
  HandshakeState lobby;
  std::string agent_nonce;
  std::string coordinator_nonce;  // as the agent read it from the Challenge
};

class LoadSim {
 public:
  explicit LoadSim(const LoadSimOptions& o)
      : o_(o), coordinator_(Options(o)), checker_(o.agents), node_rank_(static_cast<std::size_t>(o.agents), -1) {}

  Result<LoadSimResult> Run() {
    using WallClock = std::chrono::steady_clock;
    LoadSimResult result;
    auto t0 = WallClock::now();
    for (int first = 0; first < o_.agents; first += o_.window) {
      int count = std::min(o_.window, o_.agents - first);
      if (Status s = Handshake(first, count); !s.ok()) return s;
    }
    auto t1 = WallClock::now();
    // The last Join's answer holds every Assignment.
    if (Status s = Deliver(std::move(pending_)); !s.ok()) return s;
    if (assigned_ != o_.agents)
      return Status::InvalidArgument(fmt::format("{} of {} agents were assigned", assigned_, o_.agents));
    if (Status s = checker_.Finish(); !s.ok()) return s;
    auto t2 = WallClock::now();
    if (Status s = Teardown(); !s.ok()) return s;
    result.join = t1 - t0;
    result.assign = t2 - t1;
    result.teardown = WallClock::now() - t2;
    result.frames = frames_;
    return result;
  }

 private:
  static CoordinatorOptions Options(const LoadSimOptions& o) {
    CoordinatorOptions c;
    c.endpoint = "load-sim";
    c.run_id = o.run_id;
    c.min_nodes = c.max_nodes = o.agents;
    c.token = o.token;
    return c;
  }

  // Encodes `m` and decodes it as the receiving side's FrameDecoder does.
  Result<Message> Wire(const Message& m) {
    FrameDecoder decoder;
    decoder.Feed(Encode(m));
    Result<std::optional<Message>> next = decoder.Next();
    if (!next.ok()) return next.status();
    if (!next->has_value() || decoder.buffered() != 0)
      return Status::InvalidArgument(fmt::format("a {} frame did not decode as one message", TypeName(m)));
    ++frames_;
    return std::move(**next);
  }

  // Simulated time: a microsecond a message, the coordinator's tick every kSimTick.
  Status Step() {
    now_ += std::chrono::microseconds(1);
    if (now_ - last_tick_ < kSimTick) return Status::Ok();
    last_tick_ = now_;
    return Deliver(coordinator_.OnTick(now_));
  }

  // To the coordinator: `m` from agent `agent`, over the wire; its answer is delivered.
  Status FromAgent(int agent, const Message& m) {
    if (Status s = Step(); !s.ok()) return s;
    Result<Message> got = Wire(m);
    if (!got.ok()) return got.status();
    return Deliver(coordinator_.OnMessage(Conn(agent), *got, now_));
  }

  static ConnId Conn(int agent) { return static_cast<ConnId>(agent) + 1; }

  // Agents first..first+count-1: every Hello, then every Proof, then every Join,
  // as the server's lobby answers them (server.cpp, OnLobbyMessage).
  Status Handshake(int first, int count) {
    std::vector<Shaking> shaking(static_cast<std::size_t>(count));
    for (int k = 0; k < count; ++k) {
      if (Status s = SayHello(first + k, shaking[static_cast<std::size_t>(k)]); !s.ok()) return s;
    }
    for (int k = 0; k < count && !o_.token.empty(); ++k) {
      Shaking& sh = shaking[static_cast<std::size_t>(k)];
      if (Status s = Step(); !s.ok()) return s;
      Result<Message> proof =
          Wire(Proof{ProofFor(o_.token, Prover::kAgent, sh.agent_nonce, sh.coordinator_nonce, o_.run_id)});
      if (!proof.ok()) return proof.status();
      if (Status s = CheckProof(o_.token, o_.run_id, sh.lobby, std::get<Proof>(*proof)); !s.ok())
        return Refusal(first + k, s.message());
    }
    for (int k = 0; k < count; ++k) {
      if (Status s = JoinOne(first + k); !s.ok()) return s;
    }
    return Status::Ok();
  }

  Status SayHello(int agent, Shaking& sh) {
    if (!o_.token.empty()) {
      Result<std::string> nonce = RandomNonce();
      if (!nonce.ok()) return nonce.status();
      sh.agent_nonce = *nonce;
    }
    rendezvous::Hello hello;
    hello.run_id = o_.run_id;
    hello.nonce = sh.agent_nonce;
    hello.min_nodes = hello.max_nodes = o_.agents;
    if (Status s = Step(); !s.ok()) return s;
    Result<Message> got = Wire(hello);
    if (!got.ok()) return got.status();
    Result<Challenge> challenge =
        AnswerHello(o_.token, o_.run_id, std::get<rendezvous::Hello>(*got), RandomNonce, sh.lobby);
    if (!challenge.ok()) return Refusal(agent, challenge.status().message());
    Result<Message> back = Wire(*challenge);
    if (!back.ok()) return back.status();
    const auto& c = std::get<Challenge>(*back);
    if (o_.token.empty()) return Status::Ok();
    if (Status s = CheckCoordinatorProof(o_.token, sh.agent_nonce, c.nonce, o_.run_id, c.proof); !s.ok())
      return Status::InvalidArgument(fmt::format("agent {}: {}", AssignmentChecker::HostOf(agent), s.message()));
    sh.coordinator_nonce = c.nonce;
    return Status::Ok();
  }

  Status JoinOne(int agent) {
    Join join;
    join.run_id = o_.run_id;
    join.host = AssignmentChecker::HostOf(agent);
    join.addrs = {fmt::format("10.{}.{}.{}", agent >> 16 & 255, agent >> 8 & 255, agent & 255)};
    join.nproc = AssignmentChecker::NprocOf(agent);
    join.wants_table = 0;
    if (Status s = Step(); !s.ok()) return s;
    Result<Message> got = Wire(join);
    if (!got.ok()) return got.status();
    if (Status s = Deliver(coordinator_.OnAuthenticated(Conn(agent), join.host, now_)); !s.ok()) return s;
    std::vector<Action> answer = coordinator_.OnMessage(Conn(agent), *got, now_);
    if (agent + 1 < o_.agents) return Deliver(std::move(answer));
    pending_ = std::move(answer);  // the Assignments: Run times them apart
    return Status::Ok();
  }

  // Every agent beats once, then says Done; the job must end with 0.
  Status Teardown() {
    for (int agent = 0; agent < o_.agents; ++agent) {
      if (Status s = FromAgent(agent, Heartbeat{0}); !s.ok()) return s;
    }
    for (int agent = 0; agent < o_.agents; ++agent) {
      Done done{checker_generation_, node_rank_[static_cast<std::size_t>(agent)], 0};
      if (Status s = FromAgent(agent, done); !s.ok()) return s;
    }
    if (beats_back_ != o_.agents || dones_back_ != o_.agents || closes_ != o_.agents)
      return Status::InvalidArgument(fmt::format("{} heartbeats, {} dones and {} closes came back for {} agents",
                                                 beats_back_, dones_back_, closes_, o_.agents));
    if (!ended_ || ended_->exit_code != 0)
      return Status::InvalidArgument(ended_ ? "the job ended with " + std::to_string(ended_->exit_code) + ": " +
                                                  ended_->summary
                                            : std::string("the job did not end after every Done"));
    return Status::Ok();
  }

  Status Refusal(int agent, const std::string& why) {
    return Status::InvalidArgument(fmt::format("agent {}: refused ({})", AssignmentChecker::HostOf(agent), why));
  }

  // Carries out the coordinator's actions: each Send crosses the wire to its agent.
  Status Deliver(std::vector<Action> actions) {
    for (Action& action : actions) {
      Status wrong = Status::Ok();
      bool wrote = ExpandWrites(action, [&](const Action& one) {
        if (const auto* send = std::get_if<Send>(&one)) {
          if (wrong.ok()) wrong = ToAgent(static_cast<int>(send->conn) - 1, send->message);
        } else {
          ++closes_;
        }
      });
      if (!wrong.ok()) return wrong;
      if (wrote) continue;
      if (auto* ended = std::get_if<JobEnded>(&action)) {
        ended_ = *ended;
      } else if (auto* lost = std::get_if<NodeLost>(&action)) {
        return Status::InvalidArgument(fmt::format("node {} ({}) {}", lost->node_rank, lost->host, lost->what));
      }
    }
    return Status::Ok();
  }

  Status ToAgent(int agent, const Message& sent) {
    Result<Message> got = Wire(sent);
    if (!got.ok()) return got.status();
    if (auto* a = std::get_if<Assignment>(&*got)) {
      if (Status s = checker_.Add(agent, *a); !s.ok()) return s;
      node_rank_[static_cast<std::size_t>(agent)] = a->node_rank;
      checker_generation_ = a->generation;
      ++assigned_;
    } else if (std::holds_alternative<Heartbeat>(*got)) {
      ++beats_back_;
    } else if (auto* d = std::get_if<Done>(&*got); d && d->generation == checker_generation_) {
      ++dones_back_;
    } else if (!std::holds_alternative<Challenge>(*got)) {
      std::string why = std::holds_alternative<rendezvous::Refused>(*got) ? std::get<rendezvous::Refused>(*got).reason
                        : std::holds_alternative<Abort>(*got)             ? std::get<Abort>(*got).reason
                                                                          : std::string(TypeName(*got));
      return Status::InvalidArgument(
          fmt::format("agent {}: got {} ({})", AssignmentChecker::HostOf(agent), TypeName(*got), why));
    }
    return Status::Ok();
  }

  const LoadSimOptions& o_;
  Coordinator coordinator_;
  AssignmentChecker checker_;
  std::vector<int> node_rank_;  // each agent's, from its Assignment
  int checker_generation_ = 0;
  Clock::time_point now_{};
  Clock::time_point last_tick_{};
  std::vector<Action> pending_;
  std::uint64_t frames_ = 0;
  int assigned_ = 0, beats_back_ = 0, dones_back_ = 0, closes_ = 0;
  std::optional<JobEnded> ended_;
};

}  // namespace

Result<LoadSimResult> RunLoadSim(const LoadSimOptions& options) {
  if (options.agents < 1 || options.window < 1)
    return Status::InvalidArgument(
        fmt::format("load sim: {} agents, window {} (each must be at least 1)", options.agents, options.window));
  return LoadSim(options).Run();
}

}  // namespace dlaunch::rendezvous
