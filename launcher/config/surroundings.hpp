// The entrypoint form, `dlaunch -- python train.py`: where no flag fixed the
// layout, what envmap::Detect found (Slurm, mpirun, Azure ML, TF_CONFIG) becomes
// the options a user would have typed. Pure: no environment, no sockets.
//
//   slurm, openmpi  one dlaunch per task. With one worker per dlaunch
//                   (--nproc-per-node 1, or auto on a machine without GPUs) it
//                   is per-process: RANK = the task's rank, LOCAL_RANK and
//                   LOCAL_WORLD_SIZE from the task's place on its node. With
//                   more, it is per-node: node rank = the task's rank. Either
//                   way the nodes meet at a TCP rendezvous: --rdzv-endpoint,
//                   else the first Slurm host, else AZ_BATCH_MASTER_NODE, else
//                   an Open MPI bootstrap (rank 0's address, through MPI).
//   azure, tfconfig the static form: node rank, node count and master address.
//   kubeflow        PET_<FLAG> variables are already the flags' defaults.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "envmap/detect.hpp"
#include "launcher/config/cli.hpp"
#include "rendezvous/connection.hpp"

namespace dlaunch::launcher {

// The job's shape: the flags' values, or where no flag fixed the layout, what
// the surroundings said.
struct Shape {
  int min_nodes = 1;
  int max_nodes = 1;
  int node_rank = 0;
  bool node_rank_known = false;  // a flag, or the surroundings, gave it
  std::string master_addr;
  std::optional<int> master_port;
  std::optional<rendezvous::HostPort> rdzv_endpoint;  // as given (parsed here), or the surroundings'
  std::string rdzv_id;
  // One dlaunch per worker (mpirun -np N, srun -n N): that worker's place.
  std::optional<envmap::ProcessView> process_view;
};

struct Surroundings {
  envmap::Detected detected;
  Shape shape;
  bool applied = false;              // the surroundings changed the shape
  bool needs_mpi_bootstrap = false;  // the endpoint must come from rank 0 through MPI
};

// The shape of `o`, with `d` folded in unless FixesLayout(o). `nproc` is the
// resolved number of workers per dlaunch. Fails when the surroundings cannot
// give a layout, e.g. a per-process job whose workers would be told conflicting
// shapes, or naming --rdzv-endpoint when it is no HOST[:PORT].
Result<Surroundings> ApplySurroundings(const envmap::Detected& d, int nproc, const Options& o);

}  // namespace dlaunch::launcher
