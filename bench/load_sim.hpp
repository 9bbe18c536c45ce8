// The coordinator's machine and codec driven by simulated agents, with no
// sockets: what `rdzv_load --no-sockets N` measures (bench/SCALE.md), and what the
// tests run at a small N.
//
// Each simulated agent goes through what one agent of `dlaunch coordinator` goes
// through, every message encoded and decoded by the codec: Hello (with a fresh
// nonce), Challenge (the coordinator's nonce and proof, which the agent checks),
// Proof (which the coordinator checks), Join; the handshake as the server's lobby
// does it (AnswerHello, CheckProof), the Join handed to the job's Coordinator
// (OnAuthenticated, OnMessage). Agents shake hands `window` at a time, as
// rdzv_load's TCP agents do. Once every Assignment is out and checked, every
// agent sends a Heartbeat and then Done, and the job must end with exit code 0,
// each agent getting Done back. Time is simulated (each message moves it on by a
// microsecond, and the coordinator ticks every kTickPeriod of it), so that a slow
// machine cannot make an agent miss a deadline.
//
// Agent i is host "sim-i" with nproc 1 + i % 4 (so that rank offsets are tested),
// wants only its own row (wants_table 0, as a plain dlaunch agent), and must get a
// correct, complete assignment (AssignmentChecker).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "rendezvous/codec.hpp"

namespace dlaunch::rendezvous {

// Checks one generation's Assignments as they arrive, agent by agent, in O(1)
// memory an agent: node ranks 0..n-1 each given exactly once, every agent
// assigned once, nnodes n, world size the sum of nprocs, each rank offset the sum
// of the nprocs of the lower node ranks, one generation, one master, and each
// agent's one row its own (host and nproc).
class AssignmentChecker {
 public:
  // `n` agents; agent i is host HostOf(i) with nproc NprocOf(i).
  explicit AssignmentChecker(int n);
  static std::string HostOf(int agent);
  static int NprocOf(int agent);
  // InvalidArgument saying what is wrong with agent `agent`'s `a`, e.g. "agent
  // sim-3: node rank 2 was already given to sim-1".
  Status Add(int agent, const Assignment& a);
  // After every Add: InvalidArgument when an agent has none ("agent sim-7 got no
  // assignment") or a rank offset is not the sum of the ranks below it.
  Status Finish() const;

 private:
  int n_;
  std::int64_t workers_ = 0;        // sum of every agent's nproc
  std::vector<int> agent_of_rank_;  // -1: not given yet
  std::vector<int> offset_of_rank_;
  bool first_ = true;
  int generation_ = 0;
  std::string master_addr_;
  int master_port_ = 0;
};

struct LoadSimOptions {
  int agents = 1000;
  int window = 1024;                     // agents between Hello and Join at a time
  std::string token = "load-sim-token";  // "" runs without authentication
  std::string run_id = "load-sim";
};

struct LoadSimResult {
  // Wall time of each part (the clock the coordinator sees is simulated).
  std::chrono::duration<double> join{0};      // first Hello to the last Join handled
  std::chrono::duration<double> assign{0};    // the Assignments encoded, decoded, checked
  std::chrono::duration<double> teardown{0};  // Heartbeats, Dones, the job's end
  std::uint64_t frames = 0;                   // frames encoded and decoded
};

// Runs one job of `options.agents` simulated agents. Fails with InvalidArgument
// saying what went wrong: a refusal, an assignment AssignmentChecker rejects, an
// unexpected message, or a job that does not end with 0.
Result<LoadSimResult> RunLoadSim(const LoadSimOptions& options);

}  // namespace dlaunch::rendezvous
