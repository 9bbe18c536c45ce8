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
// How long the nodes have to answer a stacks query (a hang's, or `dlaunch
// stacks` of a whole job); one that does not is named as not sampled. A node
// takes at most 10 s: gdb attaches take seconds.
inline constexpr std::chrono::milliseconds kStacksAnswerTimeout{15'000};

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

// Exit codes. Once workers run a job's code is theirs (launcher/process/summary.hpp);
// only main() returns a code to the shell.
inline constexpr int kExitUsage = 2;            // a bad flag, file or variable
inline constexpr int kExitHang = 124;           // the job was stopped because it hung (as timeout(1))
inline constexpr int kExitNotExecutable = 126;  // the program exists but cannot run (as sh)
inline constexpr int kExitNotFound = 127;       // no such program (as sh)

}  // namespace dlaunch::base
