// How a failed job recovers, beyond --max-restarts: --max-no-progress-restarts,
// --restart-backoff and --spares. Their rows in the flag table (flag_table.cpp) only
// check the value; this part reads them off Options::typed into RecoveryFlags,
// which the plan carries (WorkerPlan::recovery) to the supervisor of a single
// node (launcher/process/supervisor.hpp) and to the coordinator of a
// rendezvous; the counting itself is rendezvous/restart_policy.hpp's.
//
// Pure: no clock, no files.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/status.hpp"

namespace dlaunch::launcher {

struct Options;

struct RecoveryFlags {
  // --max-no-progress-restarts K: stop (exit base::kExitNoProgress) after K
  // restarts in a row in which no rank passed its progress. Default: -1, off.
  int max_no_progress_restarts = -1;
  // --restart-backoff MIN:MAX: wait MIN before a restart after a worker's
  // failure, doubling up to MAX. Default: 0 and 0, restart at once.
  std::chrono::milliseconds backoff_min{0};
  std::chrono::milliseconds backoff_max{0};
  // --spares N: agents beyond the job's maximum wait to replace a lost node
  // (rendezvous only). Default: 0, refused.
  int spares = 0;
};

// --spares' value: a number from 0 to rendezvous::kMaxSpares. Fails
// (InvalidArgument) "--spares: expected a number from 0 to 65536, got 'x'".
Result<int> ParseSpares(std::string_view value);

// --max-no-progress-restarts' value: a number from 1 up. Fails
// (InvalidArgument) "--max-no-progress-restarts: expected a positive number, got '0'".
Result<int> ParseMaxNoProgressRestarts(std::string_view value);

// --restart-backoff's value, "MIN:MAX" in seconds (fractions allowed) with
// 0 < MIN <= MAX, or "0:0" (no wait). Fails (InvalidArgument) naming the flag
// and the value: "--restart-backoff: expected MIN:MAX seconds with MIN <= MAX,
// got '5:1'".
Result<RecoveryFlags> ParseRestartBackoff(std::string_view value);

// The flags as typed (the last of each wins); the defaults where none is.
// Fails only for a value the flag table's setter would refuse.
Result<RecoveryFlags> ReadRecoveryFlags(const Options& options);

// --explain's line about restarts, without a newline: "restarts: up to 5
// (--max-restarts), ...", or "" when none is set.
std::string ExplainRecovery(int max_restarts, const RecoveryFlags& flags);

}  // namespace dlaunch::launcher
