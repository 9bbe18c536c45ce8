#include "rendezvous/agent_machine.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>

#include <fmt/format.h>

#include "rendezvous/auth.hpp"
#include "rendezvous/retry_grid.hpp"

namespace dlaunch::rendezvous {
namespace {

std::string Seconds(std::chrono::milliseconds d) {
  return fmt::format("{:.1f}s", std::chrono::duration<double>(d).count());
}

int ClampMs(std::chrono::milliseconds d) {
  return static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(d.count(), 0, std::numeric_limits<int>::max()));
}

// Seeded from the kernel: std::random_device would ask the processor first
// (cpuid), a trap to the hypervisor on a virtual machine, at every agent's start.
uint64_t KernelSeed() {
  Result<std::string> bytes = RandomNonce();
  uint64_t seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  if (bytes.ok()) std::memcpy(&seed, bytes->data(), sizeof seed);
  return seed;
}

double DefaultRandom() {
  static std::mt19937_64 gen{KernelSeed()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(gen);
}

}  // namespace

AgentMachine::AgentMachine(AgentMachineOptions options) : options_(std::move(options)) {
  if (options_.retry_period.count() == 0) options_.retry_period = RetryPeriod(options_.max_nodes);
  if (!options_.wall)
    options_.wall = [](Clock::time_point) { return std::chrono::system_clock::now().time_since_epoch(); };
  if (!options_.random) options_.random = DefaultRandom;
  if (!options_.nonce_source) options_.nonce_source = RandomNonce;
}

bool AgentMachine::Joined() const {
  return state_ == State::kJoining || state_ == State::kRunning || state_ == State::kStopping ||
         state_ == State::kBarrier;
}

std::vector<AgentAction> AgentMachine::Start(Clock::time_point now) {
  if (state_ != State::kIdle) return Flush();
  // The wire refuses what it cannot carry whole (a run id or an address too long):
  // say so now, naming the field, rather than fail at the first send.
  for (const Message& m :
       {Message(Hello{kProtocolVersion, options_.join.run_id, std::string(kNonceSize, 'n')}), Message(options_.join)}) {
    if (Status s = CheckEncodable(m); !s.ok()) {
      state_ = State::kEnded;
      Emit(DoFinish{2, fmt::format("{}: {}", Subject(), s.message())});
      return Flush();
    }
  }
  join_deadline_ = now + options_.join_timeout;
  Connect(now);
  return Flush();
}

void AgentMachine::Connect(Clock::time_point now) {
  state_ = State::kConnecting;
  deadline_ = std::min(now + options_.handshake_timeout, join_deadline_);
  connected_ = true;
  Emit(DoConnect{});
}

void AgentMachine::HangUp() {
  if (connected_) Emit(DoHangUp{});
  connected_ = false;
}

std::vector<AgentAction> AgentMachine::OnConnected(const std::string& local_address, Clock::time_point now) {
  if (state_ != State::kConnecting) return Flush();
  if (options_.join.addrs.empty() && !local_address.empty()) options_.join.addrs.push_back(local_address);
  nonce_.clear();
  if (!options_.token.empty()) {
    Result<std::string> nonce = options_.nonce_source();
    if (!nonce.ok()) {
      Finish(1, nonce.status().message());
      return Flush();
    }
    nonce_ = *nonce;
  }
  Emit(DoSend{Hello{kProtocolVersion, options_.join.run_id, nonce_, options_.min_nodes, options_.max_nodes,
                    options_.max_restarts, ClampMs(options_.hang_timeout), options_.hang_stop ? 1 : 0, options_.spares,
                    options_.max_no_progress_restarts, ClampMs(options_.backoff_min), ClampMs(options_.backoff_max)}});
  state_ = State::kHandshake;
  deadline_ = now + options_.handshake_timeout;
  return Flush();
}

std::vector<AgentAction> AgentMachine::OnConnectFailed(const std::string& why, Clock::time_point now) {
  if (state_ != State::kConnecting) return Flush();
  connected_ = false;
  // The second, of a first rendezvous: a coordinator that another agent here
  // was starting listens by then.
  if (!options_.not_hosting.empty() && node_rank_ < 0 && ++failed_connects_ == 2) {
    Emit(
        DoNotice{fmt::format("{}: this machine could not host it ({}), and no coordinator answers there ({}); "
                             "retrying until the join timeout ({}s)",
                             Subject(), options_.not_hosting, why,
                             std::chrono::duration_cast<std::chrono::seconds>(options_.join_timeout).count())});
  }
  Retry(why, now);
  return Flush();
}

std::vector<AgentAction> AgentMachine::OnUnresolved(const std::string& why, Clock::time_point now) {
  if (state_ != State::kConnecting) return Flush();
  if (!said_unresolved_) {
    said_unresolved_ = true;
    Emit(DoNotice{fmt::format("{}: {}; retrying until the join timeout ({}s)", Subject(), why,
                              std::chrono::duration_cast<std::chrono::seconds>(options_.join_timeout).count())});
  }
  return OnConnectFailed(why, now);
}

void AgentMachine::Retry(const std::string& why, Clock::time_point now) {
  last_error_ = why;
  if (now >= join_deadline_) {
    Finish(1, fmt::format("{}: cannot connect within {}s ({})", Subject(),
                          std::chrono::duration_cast<std::chrono::seconds>(options_.join_timeout).count(), why));
    return;
  }
  Clock::duration waited = now - WaitingSince();
  RetryGrid grid = GridFor(PatientPeriod(options_.retry_period, waited), options_.max_nodes);
  std::chrono::nanoseconds wait = UntilNextTry(grid, options_.wall(now), options_.random());
  state_ = State::kBackoff;
  deadline_ = std::min(now + std::chrono::duration_cast<Clock::duration>(wait), join_deadline_);
}

std::vector<AgentAction> AgentMachine::OnMessage(const Message& message, Clock::time_point now) {
  if (Joined()) last_heard_ = now;
  if (auto* query = std::get_if<Query>(&message); query && Joined()) {
    if (state_ == State::kRunning)
      Emit(DoQuery{query->id, query->what});
    else
      Emit(DoSend{Report{query->id, node_rank_, {}}});  // no ranks run here now
    return Flush();
  }
  auto* refused = std::get_if<Refused>(&message);
  auto* abort = std::get_if<Abort>(&message);
  auto* done = std::get_if<Done>(&message);
  auto* assignment = std::get_if<Assignment>(&message);
  if (auto* standby = std::get_if<Standby>(&message); standby && Joined()) {
    OnStandby(*standby);
    return Flush();
  }
  switch (state_) {
    case State::kHandshake:
      OnHandshakeMessage(message, now);
      break;
    case State::kJoining:
      if (assignment) {
        generation_ = assignment->generation;
        node_rank_ = assignment->node_rank;
        state_ = State::kRunning;
        Emit(DoRunWorkers{*assignment});
      } else if (refused) {
        Finish(1, fmt::format("{}: refused ({})", Subject(), refused->reason));
      } else if (abort) {
        // Standing by between generations, the job's end is the job's code (123
        // after restarts without progress); before the first, a failed join's 1.
        Finish(node_rank_ >= 0 && abort->code != 0 ? abort->code : 1, options_.hosted ? "" : abort->reason);
      } else if (done) {
        Finish(done->exit_code, fmt::format("{}: the job ended without this node", Subject()));
      }
      break;
    case State::kRunning:
      if (assignment) {
        next_ = *assignment;
        outcome_.reset();
        state_ = State::kStopping;
        Emit(DoStopWorkers{1,
                           fmt::format("{}: restarting the job as generation {}", Subject(), assignment->generation)});
      } else if (abort || done || refused) {
        int code = abort ? abort->code : done ? done->exit_code : 1;
        outcome_ = code;
        state_ = State::kStopping;
        std::string reason = abort && !options_.hosted ? abort->reason
                             : refused                 ? fmt::format("{}: refused ({})", Subject(), refused->reason)
                                                       : "";
        Emit(DoStopWorkers{code, reason});
      }
      break;
    case State::kStopping:
      if (assignment && !outcome_) {
        next_ = *assignment;  // a newer generation replaces the one we were going to run
      } else if ((abort || done) && !outcome_) {
        // The workers were being stopped for a restart or a standby: what they
        // exit with is our doing, so the job's code is the coordinator's.
        only_outcome_ = next_.has_value() || standing_by_;
        next_.reset();
        standing_by_ = false;
        outcome_ = abort ? abort->code : done->exit_code;
      }
      break;
    case State::kBarrier:
      if (done) {
        Finish(own_code_ != 0 ? own_code_ : done->exit_code, "");
      } else if (abort) {
        Finish(own_code_ != 0 && !base::AfterStartCode(abort->code) ? own_code_ : abort->code,
               options_.hosted ? "" : abort->reason);
      } else if (assignment) {
        // The job restarts while this node's workers had already finished.
        generation_ = assignment->generation;
        node_rank_ = assignment->node_rank;
        state_ = State::kRunning;
        Emit(DoRunWorkers{*assignment});
      } else if (refused) {
        Lost(fmt::format("refused ({})", refused->reason));
      }
      break;
    default:
      break;  // nothing is expected: a late message on a connection being dropped
  }
  return Flush();
}

void AgentMachine::OnHandshakeMessage(const Message& message, Clock::time_point now) {
  if (auto* challenge = std::get_if<Challenge>(&message)) {
    OnChallenge(*challenge, now);
  } else if (auto* refused = std::get_if<Refused>(&message)) {
    Finish(1, fmt::format("{}: refused ({})", Subject(), refused->reason));
  } else if (auto* abort = std::get_if<Abort>(&message)) {
    Finish(1, abort->reason);
  } else {
    Finish(1, fmt::format("{}: the peer at {} is not a dlaunch coordinator (it sent {} before a challenge)", Subject(),
                          options_.endpoint, TypeName(message)));
  }
}

void AgentMachine::OnChallenge(const Challenge& challenge, Clock::time_point now) {
  if (options_.token.empty() && !challenge.nonce.empty()) {
    return Finish(1, fmt::format("{}: the coordinator wants a token (--rdzv-token, {} or --rdzv-token-file)", Subject(),
                                 kTokenEnvVar));
  }
  if (!options_.token.empty()) {
    // The coordinator proves the token first: a fake coordinator on the endpoint
    // must not hand this node a MASTER_ADDR of its choosing.
    Status proved =
        CheckCoordinatorProof(options_.token, nonce_, challenge.nonce, options_.join.run_id, challenge.proof);
    if (!proved.ok()) {
      std::string hint = options_.token_from.empty()
                             ? ""
                             : fmt::format(
                                   "; given no token, this agent used {}: give it the job's token ({}, "
                                   "--rdzv-token or --rdzv-token-file)",
                                   options_.token_from, kTokenEnvVar);
      return Finish(1, fmt::format("{}: the coordinator did not prove it holds the token ({}){}", Subject(),
                                   proved.message(), hint));
    }
    Emit(DoSend{Proof{ProofFor(options_.token, Prover::kAgent, nonce_, challenge.nonce, options_.join.run_id)}});
  }
  Emit(DoSend{options_.join});
  state_ = State::kJoining;
  last_heard_ = now;
  next_beat_ = now + options_.heartbeat_interval;
}

std::vector<AgentAction> AgentMachine::OnClosed(const Status& why, Clock::time_point now) {
  if (!connected_) return Flush();  // we hung up first
  connected_ = false;
  switch (state_) {
    case State::kHandshake:
      if (why.code() == Code::kInvalidArgument && why.message().starts_with(kVersionProblem)) {
        // Our magic, another protocol: a dlaunch of another version, not a stranger.
        Finish(1, fmt::format("{}: the coordinator at {} speaks another rendezvous protocol ({}); run one dlaunch "
                              "version on every node (dlaunch --version)",
                              Subject(), options_.endpoint, why.message()));
      } else if (why.code() == Code::kInvalidArgument) {
        Finish(1, fmt::format("{}: the peer at {} is not a dlaunch coordinator ({})", Subject(), options_.endpoint,
                              why.message()));
      } else {
        Retry(why.message(), now);
      }
      break;
    case State::kJoining:
    case State::kRunning:
    case State::kStopping:
    case State::kBarrier:
      Lost(why.message());
      break;
    default:
      break;
  }
  return Flush();
}

void AgentMachine::Lost(const std::string& why) {
  std::string reason = fmt::format("{}: lost the coordinator ({})", Subject(), why);
  HangUp();
  switch (state_) {
    case State::kJoining:
      Finish(1, reason);
      break;
    case State::kRunning:
      outcome_ = 1;
      state_ = State::kStopping;
      Emit(DoStopWorkers{1, reason});
      break;
    case State::kStopping:
      if (!outcome_) {
        next_.reset();  // no restart without the coordinator
        outcome_ = 1;
        Emit(DoNotice{reason});
      }
      break;
    case State::kBarrier:
      Finish(own_code_ != 0 ? own_code_ : 1, reason);
      break;
    default:
      break;
  }
}

std::vector<AgentAction> AgentMachine::OnWorkerFailed(int rank, int code, const std::string& reason) {
  if (state_ == State::kRunning && connected_) {
    // The ranks' last progress goes first: a heartbeat may be seconds old, and
    // whether this run got further decides whether the job restarts.
    if (options_.progress) Emit(DoSend{Heartbeat{Silence(), options_.progress()}});
    Emit(DoSend{WorkerFailed{generation_, node_rank_, rank, code, reason}});
  }
  return Flush();
}

void AgentMachine::OnStandby(const Standby& standby) {
  std::string line = options_.hosted ? "" : standby.reason;
  switch (state_) {
    case State::kRunning:
      if (standby.generation != generation_) return;
      standing_by_ = true;
      state_ = State::kStopping;
      Emit(DoStopWorkers{1, line});
      break;
    case State::kStopping:
      // A restart that was coming is off; an end that was coming stays.
      if (!outcome_ && next_ && next_->generation <= standby.generation) {
        next_.reset();
        standing_by_ = true;
      }
      break;
    case State::kBarrier:
      if (standby.generation != generation_) return;
      state_ = State::kJoining;  // its workers had finished; the job goes on without them
      if (!line.empty()) Emit(DoNotice{line});
      break;
    default:
      break;
  }
}

int AgentMachine::Silence() const {
  return state_ == State::kRunning && options_.silence ? ClampMs(options_.silence()) : 0;
}

std::vector<AgentAction> AgentMachine::OnWorkersDone(int code, Clock::time_point) {
  if (state_ == State::kRunning) {
    own_code_ = code;
    state_ = State::kBarrier;
    Emit(DoSend{Done{generation_, node_rank_, code}});
  } else if (state_ == State::kStopping) {
    if (next_) {
      generation_ = next_->generation;
      node_rank_ = next_->node_rank;
      state_ = State::kRunning;
      Emit(DoRunWorkers{*std::exchange(next_, std::nullopt)});
    } else if (standing_by_ && !outcome_) {
      standing_by_ = false;
      state_ = State::kJoining;  // joined, without workers, until the next Assignment
      // The next generation forms once every node's workers are gone.
      if (connected_) Emit(DoSend{Done{generation_, node_rank_, code}});
    } else {
      bool stop_code = outcome_ && (only_outcome_ || base::AfterStartCode(*outcome_));
      Finish(code != 0 && !stop_code ? code : outcome_.value_or(1), "");
    }
  }
  return Flush();
}

std::vector<AgentAction> AgentMachine::OnTick(Clock::time_point now, bool unread_input) {
  NoticeWait(now);
  switch (state_) {
    case State::kConnecting:
      if (now >= deadline_) {
        HangUp();
        // A try the join timeout cut short (a lookup or connect still in
        // flight) has not waited the handshake timeout: why the agent gives up
        // is what the try before it met ("timed out" where none came before).
        bool cut_short = deadline_ == join_deadline_;
        Retry(cut_short ? last_error_ : fmt::format("no connection within {}", Seconds(options_.handshake_timeout)),
              now);
      }
      break;
    case State::kBackoff:
      if (now < deadline_) break;
      if (now >= join_deadline_) {
        Retry(last_error_, now);  // gives up
      } else {
        Connect(now);
      }
      break;
    case State::kHandshake:
      if (now >= deadline_) {
        HangUp();
        if (!warned_silent_) {
          warned_silent_ = true;
          Emit(
              DoNotice{fmt::format("{}: no answer to hello within {} (not a dlaunch coordinator, or a stopped "
                                   "one?); trying again until the join timeout",
                                   Subject(), Seconds(options_.handshake_timeout))});
        }
        Retry(fmt::format("no answer to hello within {}", Seconds(options_.handshake_timeout)), now);
      }
      break;
    default:
      if (!Joined() || !connected_) break;
      if (now - last_heard_ > options_.heartbeat_timeout) {
        if (!unread_input) {
          Lost(fmt::format("nothing heard for {}", Seconds(options_.heartbeat_timeout)));
          break;
        }
        last_heard_ = now;  // it spoke; we have not read it yet
      }
      if (now >= next_beat_) {
        Heartbeat beat{Silence(), {}};
        if (state_ == State::kRunning && options_.progress) beat.progress = options_.progress();
        Emit(DoSend{std::move(beat)});
        next_beat_ = now + options_.heartbeat_interval;
      }
      break;
  }
  return Flush();
}

void AgentMachine::NoticeWait(Clock::time_point now) {
  bool joined = state_ == State::kJoining;
  bool before = state_ == State::kConnecting || state_ == State::kBackoff || state_ == State::kHandshake;
  if (node_rank_ >= 0 || !(before || (joined && !options_.hosted))) return;  // a first rendezvous only
  Clock::time_point since = WaitingSince();
  if (!wait_notice_.Due(since, now)) return;
  auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - since);
  if (joined) {
    Emit(DoNotice{fmt::format("{}: joined; still waiting after {}s for the other nodes", Subject(), waited.count())});
    return;
  }
  auto left = std::chrono::duration_cast<std::chrono::seconds>(join_deadline_ - now);
  Emit(
      DoNotice{fmt::format("{}: no coordinator yet after {}s (last try: {}); trying until the join timeout, {}s "
                           "from now",
                           Subject(), waited.count(), last_error_, left.count())});
}

std::vector<AgentAction> AgentMachine::Answer(int id, std::vector<std::string> items) {
  if (!Joined() || !connected_) return Flush();
  // The session shortens its items to fit; this is the last guard, so that a
  // report too big to encode is cut rather than thrown: items over kMaxString go,
  // then whatever passes the frame's caps.
  Report report{id, node_rank_, {}};
  std::size_t size = PayloadSize(report);
  std::size_t left_out = 0;
  for (std::string& item : items) {
    std::size_t cost = 4 + item.size();
    if (item.size() > kMaxString || size + cost > kMaxPayload || report.items.size() >= kMaxListItems) {
      ++left_out;
      continue;
    }
    size += cost;
    report.items.push_back(std::move(item));
  }
  if (left_out > 0) {
    Emit(DoNotice{fmt::format("{}: left {} item{} out of the report for query {} (over the frame's caps)", Subject(),
                              left_out, left_out == 1 ? "" : "s", id)});
  }
  Emit(DoSend{std::move(report)});
  return Flush();
}

std::vector<AgentAction> AgentMachine::Leave() {
  if (state_ == State::kEnded) return Flush();
  if (Joined() && connected_) Emit(DoSend{rendezvous::Leave{node_rank_}});
  HangUp();
  state_ = State::kEnded;
  return Flush();
}

std::optional<AgentMachine::Clock::time_point> AgentMachine::NextDeadline() const {
  switch (state_) {
    case State::kConnecting:
    case State::kBackoff:
    case State::kHandshake:
      return deadline_;
    default:
      if (!Joined() || !connected_) return std::nullopt;
      return std::min(next_beat_, last_heard_ + options_.heartbeat_timeout + std::chrono::milliseconds(1));
  }
}

void AgentMachine::Finish(int code, std::string error) {
  HangUp();
  state_ = State::kEnded;
  Emit(DoFinish{code, std::move(error)});
}

}  // namespace dlaunch::rendezvous
