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

#include <string>
#include <vector>

#include "envmap/detect.hpp"
#include "launcher/config/cli.hpp"

namespace dlaunch::launcher {

struct Surroundings {
  envmap::Detected detected;
  bool applied = false;             // the options were changed
  bool needs_mpi_bootstrap = false; // the endpoint must come from rank 0 through MPI
};

// Folds `d` into `o` unless o.layout_given. `nproc` is the resolved number of
// workers per dlaunch. Fails when the surroundings cannot give a layout, e.g.
// a per-process job whose workers would be told conflicting shapes.
Result<Surroundings> ApplySurroundings(const envmap::Detected& d, int nproc, Options& o);

// The --explain report: the source, its evidence, and the layout dlaunch would
// launch, one fact per line.
std::string Explain(const Surroundings& s, const Options& o, int nproc, const std::vector<std::string>& argv);

}  // namespace dlaunch::launcher
