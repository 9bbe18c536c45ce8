// One generation's assignment, as a pure function of the agents taking part:
// their node ranks (ranks.hpp), the node table, the master endpoint, and the
// Assignment each agent gets. The coordinator's core (rendezvous_core.hpp) picks
// the members and sends the result.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/codec.hpp"

namespace dlaunch::rendezvous {

// An agent taking part, as its Join left it. `join` must outlive the call.
struct GenerationMember {
  const Join* join = nullptr;
  int slot = -1;              // its fixed slot (ClaimSlot), or -1
  std::uint64_t arrival = 0;  // the sequence number of its Join
};

struct GenerationSettings {
  int number = 0;  // the generation, from 1
  int restart_count = 0;
  std::string run_id;
  int master_port = 0;  // 0: node rank 0's master_port_hint, else default_master_port
  int default_master_port = 0;
};

struct Generation {
  std::vector<int> node_ranks;      // of each member, in the members' order
  std::vector<envmap::Node> table;  // by node rank
  std::vector<int> rank_offsets;    // global rank of each node's local rank 0, by node rank
  int workers = 0;                  // the world size
  // With the whole table when a member asked for it (else without); node_rank
  // and rank_offset unset.
  Assignment whole;
  Assignment own_row;   // the same without the table
  std::string problem;  // why the job cannot run; empty when it can
};

// Generation `settings.number` of `members` (at least one). When the job cannot
// run, `problem` says why and only node_ranks and table are filled: "3 nodes ask
// for 2147483648 workers in all, over the cap of 2147483647", or, when a member
// wants the whole table, "the node table of 40000 nodes takes 20000000 bytes, over
// the frame cap of 16777216".
Generation PlanGeneration(const std::vector<GenerationMember>& members, const GenerationSettings& settings);

// What node `node_rank` of `generation` is sent: the whole table when it asked for
// it (Join::wants_table), else only its own row, so that a job of n such agents
// costs O(n) bytes rather than O(n^2).
Assignment AssignmentFor(const Generation& generation, int node_rank, bool wants_table);

}  // namespace dlaunch::rendezvous
