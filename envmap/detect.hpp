// Working out where dlaunch runs from the variables of whatever started it: the
// inverse of worker_env.hpp. Pure: the environment comes in as a snapshot.
//
// Sources, in order of precedence (the first that is present wins; explicit
// flags beat all of them and are the caller's business):
//   kubeflow  PET_NNODES / PET_NODE_RANK / PET_MASTER_ADDR ... (PyTorchJob, Trainer)
//   slurm     SLURM_JOB_ID with SLURM_NODEID, SLURM_NNODES, SLURM_JOB_NODELIST
//   openmpi   OMPI_COMM_WORLD_RANK / _SIZE (one dlaunch per node, or per worker)
//   azure     AZ_BATCH_MASTER_NODE / AZ_BATCHAI_MPI_MASTER_NODE
//   tfconfig  TF_CONFIG's task type and index
//   local     none of the above: one node
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/defaults.hpp"  // kMaxHosts
#include "envmap/layout.hpp"
#include "base/status.hpp"

namespace dlaunch::envmap {

using base::kMaxHosts;  // base/defaults.hpp

enum class Source { kKubeflow, kSlurm, kOpenMpi, kAzure, kTfConfig, kLocal };

std::string_view SourceName(Source source);

struct Detected {
  Source source = Source::kLocal;
  int node_rank = 0;
  int nnodes = 1;
  std::optional<int> nproc;  // workers per node, when the source says
  std::string master_addr;   // empty: not known from the source
  std::optional<int> master_port;
  std::optional<int> rdzv_port;    // a port the source reserved for this job step
  std::string rdzv_endpoint;       // Kubeflow's PET_RDZV_ENDPOINT
  std::string run_id;              // SLURM_JOB_ID, PET_RDZV_ID
  std::vector<std::string> hosts;  // the job's nodes in node-rank order, when known
  // The per-process view, where the source started one process per worker
  // (mpirun -np N, srun -n N): used when dlaunch itself runs one worker
  // (--nproc-per-node 1), so that the seeds' aml_mpienv.py helper is unneeded.
  bool has_process_view = false;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_size = 1;
  // One line per fact, for --explain: "node rank 1 from SLURM_NODEID".
  std::vector<std::string> evidence;
};

// Detects the layout. Fails with InvalidArgument naming the variable and its
// value when one is malformed, e.g. "SLURM_NODEID: expected a number, got 'x'".
Result<Detected> Detect(const EnvMap& env);

// A value as quoted in a message: its first 200 bytes (a 100 KiB variable would
// make an unreadable line), bytes outside printable ASCII as \xNN (they would
// drive the terminal).
std::string Shown(std::string_view value);

// Expands a Slurm hostlist: "gpu[001-004,007],cpu01" gives gpu001 .. gpu004,
// gpu007, cpu01 (zero padding kept); "b04-[09-10]" gives b04-09, b04-10; several
// bracket groups multiply ("r[1-2]n[1-2]" gives r1n1 r1n2 r2n1 r2n2). Fails on an
// unbalanced bracket, a bad range, a number over 2^32-1, a host name over 255
// bytes or more than kMaxHosts hosts (counted before any is made), naming the
// text (its first 200 bytes).
Result<std::vector<std::string>> ExpandHostlist(std::string_view list);

// The number of tasks on node `node` from Slurm's compressed per-node counts:
// "2(x3),1" is 2, 2, 2, 1. nullopt when `node` is past the list or the text is
// malformed.
std::optional<int> TasksOnNode(std::string_view counts, int node);

// Variables a worker must not inherit from the launcher's own launcher: under
// mpirun, dlaunch's OMPI_COMM_WORLD_*, PMIX_* and OMPI_MCA_ess_* would make a
// worker's own MPI_Init take dlaunch's identity.
bool IsLauncherPrivate(std::string_view name);

// Slurm's view of one task (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, ...). When
// one dlaunch task runs several workers, these describe dlaunch and not them, and
// Lightning, which checks SLURM_NTASKS before TorchElastic's variables, would take
// SLURM_PROCID as every worker's rank.
bool IsSlurmTaskVariable(std::string_view name);

}  // namespace dlaunch::envmap
