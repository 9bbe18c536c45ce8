// The failure summary printed when a job ends badly: who failed first, how, and
// why, from the worker's torch `@record` error file or the tail of its stderr;
// or, for a job that --hang-action stop ended, the hang.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/process/supervisor.hpp"

namespace dlaunch::launcher {

class WorkerGroup;

// A worker's TORCHELASTIC_ERROR_FILE: in dlaunch's private directory, since
// dlaunch reads it back.
std::string ErrorFilePath(const std::string& private_dir, int restart, int local_rank);

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
//   rank 1 exited with code 124, reported as 1: ...   (JobCodeNote, only then)
//   root cause: rank 1 (local_rank 1, pid 4242) exited with code 3 after 0.52s
//     | <error message or stderr lines>
//   stopped: rank 0 (local_rank 0) was killed by SIGTERM, ...
// `cause` is nullptr when the job was stopped by a signal or from outside.
std::vector<std::string> FailureSummary(int exit_code, const WorkerReport* cause,
                                        const std::vector<WorkerReport>& others, int stop_signal);

// A node's job at its end, for NodeEndLines.
struct NodeEnd {
  int exit_code = 0;
  int stop_signal = 0;                   // the signal that stopped the job; 0: none
  std::vector<WorkerReport> workers;     // the last generation's, by local rank
  std::optional<WorkerReport> cause;     // the root cause, with its message or stderr tail
  std::vector<std::string> hang_cause;   // --hang-action stop ended the job: why (HangCause)
  std::vector<std::string> kill_stacks;  // where the workers killed after a failure were
};

// What `group` says at its end, once its supervisor is done: each worker as
// told (global rank, the LOCAL_RANK it was given) and the root cause with the
// message of its error file (under `private_dir`) or else its last 5 stderr lines.
NodeEnd GatherEnd(const WorkerGroup& group, const std::string& private_dir);

// The lines a node prints when its job ends: after a hang that stopped it,
// "job stopped after a hang; exit code N" and the hang's cause; after a failure
// with a root cause or a stop signal, FailureSummary; nothing for a job that
// succeeded or was ended from elsewhere. Then kill_stacks, in every case.
std::vector<std::string> NodeEndLines(const NodeEnd& end);

}  // namespace dlaunch::launcher
