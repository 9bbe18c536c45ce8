// When a failed job restarts, and when it stops: the rules of --max-restarts,
// --max-no-progress-restarts and --restart-backoff, as a pure part with no clock
// of its own. The coordinator's core asks it at each failure of a generation,
// and so does a single node's supervisor; both count one failure anywhere in
// the job as one restart.
//
// Progress: a rank makes progress when it reports a larger number than the
// largest it had reported by the previous failure (its progress file,
// DLAUNCH_PROGRESS_FILE). A generation in which no rank reported anything
// counts as progress once it ran healthy_run. Output is not progress: a script
// that crashes at step 0 prints the same imports and warnings on every run.
//
// A restart made no progress when its generation failed without progress. After
// max_no_progress_restarts of those in a row the job stops (kNoProgress), so a
// script that crashes at step 0 runs K + 1 times. A lost node is not the
// script's fault: its failure neither adds to that count nor waits, though a
// generation that made progress before it resets the count all the same.
//
// Backoff: after a worker's failure the restart waits backoff_min, doubling
// with each failure in a row up to backoff_max; a generation that ran
// healthy_run resets it (Kubernetes' CrashLoopBackOff).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "base/defaults.hpp"

namespace dlaunch::rendezvous {

struct RestartRules {
  int max_restarts = 0;
  int max_no_progress_restarts = -1;  // -1: off
  // 0 and 0: restart at once.
  std::chrono::milliseconds backoff_min{0};
  std::chrono::milliseconds backoff_max{0};
  std::chrono::milliseconds healthy_run{base::kHealthyRun};
};

// Why a generation ended: a worker failed, or a node was lost.
enum class Failure { kWorker, kNodeLost };

struct RestartDecision {
  enum class Verdict { kRestart, kNoProgress, kExhausted };
  Verdict verdict = Verdict::kExhausted;
  std::chrono::milliseconds wait{0};  // before the restart
  // For kNoProgress, what to say: "2 restarts in a row made no progress (no
  // rank passed its progress at the previous failure)".
  std::string why;
};

class RestartPolicy {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RestartPolicy(RestartRules rules);

  // A generation's workers started at `now`.
  void Started(Clock::time_point now);
  // Rank `rank` reports `value` (>= 0; a smaller value than before is kept as
  // nothing new). Any time; values of a rank the job no longer has are harmless.
  void Progress(int rank, std::int64_t value);
  // The running generation failed at `now`: restart (counted now), or stop.
  RestartDecision Failed(Failure kind, Clock::time_point now);

  int restarts() const { return restarts_; }
  // Restarts in a row that made no progress, so far.
  int no_progress_streak() const { return no_progress_; }
  const RestartRules& rules() const { return rules_; }

 private:
  // Some rank passed the largest value it had at the failure before.
  bool PassedLevel() const;
  std::chrono::milliseconds Backoff(bool healthy);

  RestartRules rules_;
  std::map<int, std::int64_t> best_;     // each rank's largest value so far
  std::map<int, std::int64_t> at_fail_;  // each rank's largest value at the previous failure
  bool reported_ = false;                // some rank reported a value in this generation
  bool restarted_ = false;               // the running generation is a restart
  std::optional<Clock::time_point> started_;
  int restarts_ = 0;
  int no_progress_ = 0;
  int quick_failures_ = 0;  // worker failures in a row without a healthy run
};

}  // namespace dlaunch::rendezvous
