// The coordinator's hang detector: from the heartbeats of the running nodes, when
// the whole job has been silent for hang_timeout. A state machine with no sockets
// and no clock (the times come with the events); one thread calls it.
//
// Each Heartbeat of a running node says how long its ranks have been silent. The
// job is silent for the stretch that ends at the earliest of the running nodes'
// last heartbeats and starts at the latest of their ranks' last output (heartbeat
// time - silent_ms, and never before the generation began): output a node wrote
// after its last heartbeat is not known yet, so time since a heartbeat is never
// counted as silence, and a hang is noticed up to one heartbeat period late
// rather than reported falsely. A node that finished no longer beats, but its end
// is progress: the job's silence starts no earlier than its last output or its end
// (another node sleeping through a peer's last lines is not a hang). Once reported, a silence is reported again only
// after new output (the latest output moved on by more than the heartbeats' jitter)
// and a new full silence. With hang_timeout 0 it does nothing.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/coordinator.hpp"

namespace dlaunch::rendezvous {

class HangDetector {
 public:
  // `subject` starts its log lines ("rendezvous head:29400").
  HangDetector(std::string subject, std::chrono::milliseconds hang_timeout);

  // A generation of `table` (by node rank) began at `now`: every node is running,
  // none heard from yet, and the last reported silence is forgotten.
  void OnGeneration(const std::vector<envmap::Node>& table, Clock::time_point now);
  // A Heartbeat of node `node_rank` of the running generation, whose ranks have
  // been silent for `silent_ms`: a negative one counts as 0, with one Log line.
  std::vector<Action> OnHeartbeat(int node_rank, int silent_ms, Clock::time_point now);
  // Node `node_rank` finished (Done) or went away at `now`: it no longer beats,
  // and its end counts as its last output.
  void OnNodeFinished(int node_rank, Clock::time_point now);
  // The job ended: nothing runs.
  void OnJobEnd();

  // The job's silence, once it reaches hang_timeout and was not reported yet;
  // marks it reported. nullopt while some running node has not beaten in this
  // generation, when none runs, or when the detector is off.
  std::optional<std::chrono::milliseconds> Check();

 private:
  struct Watch {
    std::string host;
    bool running = true;
    std::optional<Clock::time_point> beat_at;  // its last heartbeat
    Clock::time_point quiet_since;             // its ranks' last output, as that beat told
  };

  std::string subject_;
  std::chrono::milliseconds hang_timeout_;
  Clock::time_point generation_began_;
  std::vector<Watch> nodes_;  // by node rank
  // The job's last output when its silence was last reported: the next report
  // needs output after it.
  std::optional<Clock::time_point> mark_;
};

}  // namespace dlaunch::rendezvous
