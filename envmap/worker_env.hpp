// Maps a job layout onto the variables one worker sees, in every dialect.
//
//   PyTorch (torchrun)          always
//   TF_CONFIG                   when the layout has roles
//   Open MPI (OMPI_COMM_WORLD_*) Flavors::ompi
//   Azure ML (AZ_BATCH_*)        Flavors::azure
//   Horovod (HOROVOD_*)          Flavors::horovod
//
// See shared/REFERENCE.md section 1 for each contract.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/defaults.hpp"  // kAzureMasterPort
#include "envmap/layout.hpp"

namespace dlaunch::envmap {

enum class LocalRankArg {
  kNone,        // torchrun: the worker's argv is exactly what the user wrote
  kDash,        // torch.distributed.launch in PyTorch >= 2.0: --local-rank=N
  kUnderscore,  // torch.distributed.launch in PyTorch 1.x: --local_rank=N
};

// The variable that names a worker's progress file, where it writes how far it
// got (dlaunch's own, in every dialect).
inline constexpr const char* kProgressFileVar = "DLAUNCH_PROGRESS_FILE";

struct Flavors {
  bool ompi = false;
  bool azure = false;
  bool horovod = false;
  std::string azure_hostfile;  // path of the hostfile the launcher wrote (AZUREML_MPI_HOSTFILE)
  std::string error_file;      // TORCHELASTIC_ERROR_FILE for this worker; empty: not set
  // DLAUNCH_PROGRESS_FILE for this worker (launcher/process/progress_files.hpp); empty: not set.
  std::string progress_file;
  LocalRankArg local_rank_arg = LocalRankArg::kNone;
  // --launch-mode per-node: the one process per node is itself a launcher.
  bool per_node = false;
  // --env horovod: this node's network interface toward node rank 0's store
  // (HOROVOD_GLOO_IFACE), found at the edge; empty: not set.
  std::string horovod_iface;
  // --virtual-local-rank (torchrun 2.x): every worker sees LOCAL_RANK=0 and only
  // its own GPU (VirtualGpu) in CUDA_VISIBLE_DEVICES.
  bool virtual_local_rank = false;
};

// The variables to set in `slot`'s worker on top of the inherited environment.
// `inherited` is the launcher's environment: a variable torchrun leaves alone when
// the user set it (OMP_NUM_THREADS, NCCL_ASYNC_ERROR_HANDLING,
// TORCH_NCCL_ASYNC_ERROR_HANDLING) is left out of the result when present there.
// Role-specific variables (RoleSpec::env) come last and win. With
// Flavors::per_node the PyTorch set is PerNodeEnv's instead.
EnvVars WorkerEnv(const JobLayout& layout, const WorkerSlot& slot, const Flavors& flavors, const EnvMap& inherited);

// What a per-node launcher (torch.distributed.launch, Lightning, accelerate, seed
// 004's launch.py) reads on its node: NODE_RANK, GROUP_RANK, NNODES,
// GROUP_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and Azure ML's AZ_BATCH_MASTER_NODE /
// AZ_BATCHAI_MPI_MASTER_NODE. No RANK, LOCAL_RANK, WORLD_SIZE or TORCHELASTIC_*:
// the child launcher sets those for its own workers, and Lightning takes a
// LOCAL_RANK or TORCHELASTIC_RUN_ID in its environment to mean it must not spawn.
EnvVars PerNodeEnv(const JobLayout& layout, const Flavors& flavors);

// The one GPU a worker at `local_rank` sees under --virtual-local-rank, as torch
// 2.x's LocalElasticAgent picks it: entry `local_rank` of the launcher's
// CUDA_VISIBLE_DEVICES (split at ',', blanks trimmed), or the local rank itself
// when the variable is unset. nullopt when the list has no such entry.
std::optional<std::string> VirtualGpu(const EnvMap& inherited, int local_rank);

// Each dialect on its own (WorkerEnv is their concatenation).
EnvVars TorchEnv(const JobLayout& layout, const WorkerSlot& slot, const Flavors& flavors, const EnvMap& inherited);
EnvVars OmpiEnv(const JobLayout& layout, const WorkerSlot& slot);
EnvVars AzureEnv(const JobLayout& layout, const Flavors& flavors);
// Horovod's variables as horovodrun's gloo mode sets them: the rank ones
// (CROSS_RANK/CROSS_SIZE as Horovod counts them: among the nodes that have this
// local rank, so 2+3+1 gives local rank 1 a cross size of 2), HOROVOD_HOSTNAME
// (HorovodHostName), and, unless one dlaunch runs one worker (process_view:
// under mpirun Horovod has MPI), the store's: HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT
// (master_addr, HorovodStorePort), HOROVOD_CONTROLLER=gloo,
// HOROVOD_CPU_OPERATIONS=gloo and HOROVOD_GLOO_IFACE when flavors names one.
EnvVars HorovodEnv(const JobLayout& layout, const WorkerSlot& slot, const Flavors& flavors = {});
// The store's port: master_port + kHorovodStorePortOffset.
int HorovodStorePort(const JobLayout& layout);
// The name node `node_rank` goes by in Horovod (HOROVOD_HOSTNAME, and so its
// "local_<name>" scope): its host, or "host-N" when another node of the layout
// has the same host (network namespaces and containers share one hostname, and
// two nodes in one local scope would never meet).
std::string HorovodHostName(const JobLayout& layout, int node_rank);
// Every scope Horovod's gloo contexts use in this job and how many ranks it
// has, both spellings: "global" (and "global_", Horovod 0.18-0.20),
// "local_<HorovodHostName>" (and "local_<node rank>", before 0.20.1),
// "cross_<local rank>". The layout must be valid and whole (no placeholders).
std::vector<std::pair<std::string, int>> HorovodScopes(const JobLayout& layout);

// TF_CONFIG for `slot`, as compact JSON:
// {"cluster":{"chief":["h:p"],"worker":[...],"ps":[...]},"task":{"type":"worker","index":0},"environment":"cloud"}
// Each task's address is its node's addr and its own port. The evaluator is left
// out of "cluster" (as Kubeflow does) but gets its own "task". Roles absent from
// the job are absent from "cluster".
std::string TfConfig(const JobLayout& layout, const WorkerSlot& slot);

// The MPI hostfile Azure ML jobs expect: one "addr slots=N" line per node.
std::string AzureHostfile(const JobLayout& layout);

// Arguments torch.distributed.launch appends after the user's: {"--local-rank=N"},
// {"--local_rank=N"} or nothing.
std::vector<std::string> LocalRankArgs(const JobLayout& layout, const WorkerSlot& slot, LocalRankArg style);

}  // namespace dlaunch::envmap
