// The numbers every layer agrees on: the ports torchrun's users expect, the caps
// no flag, file or peer may pass, and the exit codes dlaunch chooses itself.
// Each is written here and nowhere else (the rendezvous, the CLI and the runner
// all read these); a layer may re-export one under its own namespace with a
// using-declaration, never a second literal. Limits of one module's own input
// (a frame's size, a YAML file's bytes) stay beside that module.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace dlaunch::base {

// Ports: torchrun's two, and the Azure ML dialect's.
inline constexpr int kDefaultMasterPort = 29500;  // --master-port across nodes
inline constexpr int kDefaultRdzvPort = 29400;    // the --rdzv-endpoint port when none is given
inline constexpr int kAzureMasterPort = 6105;     // the Azure ML dialect's, when none is given (seed 002's helper)
// The address a job that stays on this machine meets on: --master-addr's default,
// and where the head's coordinator listens when every node is this machine.
inline constexpr const char* kLoopbackAddress = "127.0.0.1";
// --env horovod: the gloo rendezvous store (launcher/jobwide/horovod_store.hpp)
// listens on node rank 0 at MASTER_PORT + this. Every node already learns
// MASTER_PORT (from the flags, or from the rendezvous's assignment), so every
// node computes the store's port itself: no new field in the rendezvous
// protocol, and no second port to agree on. Node rank 0 holds the pair from
// before it is chosen (a free port whose successor is free too).
inline constexpr int kHorovodStorePortOffset = 1;

// The most workers one node runs: hostfile slots, --nproc-per-node, --roles in
// all, a job spec's processes, and the nproc one rendezvous Join may ask for.
inline constexpr int kMaxWorkersPerNode = 65536;
// The most hosts a node list may name (Slurm hostlist, -H, hostfile, --nodes, --nnodes).
inline constexpr uint64_t kMaxHosts = 1048576;
// The most instances (nodes, tasks) a job spec asks for, and any one count in it.
inline constexpr int kMaxJobInstances = 65536;

// Timeouts: the flags' defaults (torchrun's where it has the flag), and the
// rendezvous's, which agent and coordinator must agree on.
inline constexpr std::chrono::milliseconds kDefaultJoinTimeout{600'000};      // --rdzv-conf join_timeout
inline constexpr std::chrono::milliseconds kDefaultLastCallTimeout{30'000};   // --rdzv-conf last_call_timeout
inline constexpr std::chrono::milliseconds kDefaultHeartbeatTimeout{15'000};  // --rdzv-conf heartbeat_timeout
inline constexpr std::chrono::milliseconds kHandshakeTimeout{10'000};         // a connection's challenge and answer
inline constexpr std::chrono::milliseconds kDefaultShutdownTimeout{30'000};   // --shutdown-timeout: SIGTERM to SIGKILL
inline constexpr std::chrono::milliseconds kDefaultHangTimeout{1'800'000};    // --hang-timeout
// --health-check: how long one check may run, and how often a held-out node
// checks again (also: how old a passing check may be when the job restarts).
inline constexpr std::chrono::milliseconds kDefaultHealthCheckTimeout{60'000};    // --health-check-timeout
inline constexpr std::chrono::milliseconds kDefaultHealthCheckInterval{300'000};  // --health-check-interval
// Straggler detection: how often the ranks are compared, and the share of
// their time the others must lose waiting for one rank to name it.
inline constexpr std::chrono::milliseconds kDefaultStragglerWindow{60'000};  // --straggler-window
inline constexpr double kDefaultStragglerThreshold = 0.10;                   // --straggler-threshold
// How long the nodes have to answer a stacks query (a hang's, or `dlaunch
// stacks` of a whole job); one that does not is named as not sampled. A node
// takes at most 10 s: gdb attaches take seconds.
inline constexpr std::chrono::milliseconds kStacksAnswerTimeout{15'000};
// A generation that ran this long counts as healthy: it resets the restart
// backoff, and counts as progress where no rank writes its progress file
// (Kubernetes resets CrashLoopBackOff after 10 minutes of running).
inline constexpr std::chrono::milliseconds kHealthyRun{600'000};

// Pipe memory. Linux charges a pipe's capacity to the user who made it
// (fs.pipe-user-pages-soft: 64 MiB for a user without CAP_SYS_RESOURCE), and
// past that limit every new pipe of that user's, in any program, gets 8 KiB.
// A job grows a pipe from the default 64 KiB to kBusyPipeBytes only for a busy
// stream (its workers', its console's): one that moved kBusyStreamBytes within
// kBusyWindow, a few reads of fast output. It adds at most kJobPipeBudget in
// all: eight busy ranks and the console, with room to spare; four such jobs at
// once leave the user 12 MiB for other pipes.
inline constexpr int kBusyPipeBytes = 1 << 20;  // Linux's fs.pipe-max-size default
inline constexpr size_t kJobPipeBudget = size_t{12} << 20;
inline constexpr size_t kBusyStreamBytes = size_t{256} << 10;
inline constexpr std::chrono::milliseconds kBusyWindow{100};

// Exit codes: the one table of the codes dlaunch chooses itself (the man page's
// EXIT STATUS is made from kExitCodes; docs/exit-codes.md shows it to users and
// a test holds the two together). Only main() returns a code to the shell.
//
// Before any worker runs a failure is dlaunch's own: a bad flag (2), a command
// that cannot run (126, 127, as sh says). Once workers ran the job's code is
// the first failed worker's (launcher/process/supervisor.hpp JobCode), 128+N
// for signal N, or one of the codes dlaunch gives a job itself after the
// start (after_start): 122, 123 and 124. A worker's own code that equals one of
// those is reported as kExitWorkerClash, so that a scheduler that sees 122, 123
// or 124 knows dlaunch gave it (the summary says which rank exited with what).
inline constexpr int kExitUsage = 2;            // a bad flag, file or variable
inline constexpr int kExitStraggler = 122;      // a straggler was named: requeue away from its node
inline constexpr int kExitNoProgress = 123;     // restarts made no progress: do not requeue this job
inline constexpr int kExitHang = 124;           // the job was stopped because it hung (as timeout(1))
inline constexpr int kExitNotExecutable = 126;  // the program exists but cannot run (as sh)
inline constexpr int kExitNotFound = 127;       // no such program (as sh)
// What a worker's own exit code that is one of the after_start codes becomes.
inline constexpr int kExitWorkerClash = 1;

struct ExitCodeRow {
  int code;
  const char* meaning;  // a sentence for the man page, lower case
  // dlaunch may give it once workers ran, so a worker's own is never passed on.
  bool after_start;
  const char* what;  // after_start: the summary's name for it ("a hang")
};

inline constexpr ExitCodeRow kExitCodes[] = {
    {kExitUsage, "bad usage: a flag, file, variable or job spec (one line says which).", false, ""},
    {kExitStraggler,
     "--straggler-action stop ended a job that a slow rank held back; its node's host name is in "
     "--straggler-file, so that a scheduler can requeue the job away from it.",
     true, "a straggler"},
    {kExitNoProgress,
     "restarts made no progress (--max-no-progress-restarts): the job fails the same way each time, so a scheduler "
     "should not requeue it.",
     true, "restarts without progress"},
    {kExitHang, "--hang-action stop ended a hung job (as timeout(1)).", true, "a hang"},
    {kExitNotExecutable, "the command exists but cannot be run (as sh).", false, ""},
    {kExitNotFound, "the command was not found (as sh).", false, ""},
};

// The row of `code` when dlaunch gives it to a job after its workers ran; null
// for any other code.
constexpr const ExitCodeRow* AfterStartCode(int code) {
  for (const ExitCodeRow& row : kExitCodes)
    if (row.code == code && row.after_start) return &row;
  return nullptr;
}

}  // namespace dlaunch::base
