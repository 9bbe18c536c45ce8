// The failure summary printed when a job ends badly: who failed first, how, and
// why, from the worker's torch `@record` error file or the tail of its stderr.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/process/supervisor.hpp"

namespace dlaunch::launcher {

// The message inside a torch.distributed.elastic error file:
// {"message": {"message": "RuntimeError: ...", "extraInfo": {...}}} or
// {"message": "..."}. nullopt when the text is not such a file.
std::optional<std::string> ErrorFileMessage(const std::string& json_text);

struct WorkerReport {
  WorkerRecord record;
  int rank = 0;
  std::optional<std::string> error_message;  // from the error file
  std::vector<std::string> stderr_tail;      // last lines of stderr
};

// Lines (without "dlaunch: " or newlines) describing the end of a failed job:
//   job failed with exit code 3
//   root cause: rank 1 (local_rank 1, pid 4242) exited with code 3 after 0.52s
//     | <error message or stderr lines>
//   stopped: rank 0 (local_rank 0) was killed by SIGTERM, ...
// `cause` is nullptr when the job was stopped by a signal or from outside.
std::vector<std::string> FailureSummary(int exit_code, const WorkerReport* cause,
                                        const std::vector<WorkerReport>& others, int stop_signal);

}  // namespace dlaunch::launcher
