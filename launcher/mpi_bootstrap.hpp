// The Open MPI bootstrap: when mpirun starts one dlaunch per node and nothing
// names a rendezvous endpoint, the MPI ranks agree on one through MPI itself.
// Only where dlaunch was built with MPI (CMake found it); the build works
// without, and then this reports that it is unavailable.
#pragma once

#include <string>

#include "envmap/status.hpp"

namespace dlaunch::launcher {

// True when this binary was built with MPI.
bool MpiBootstrapAvailable();

// Every rank calls it; each gets rank 0's `mine`. MPI_Init, one broadcast,
// MPI_Finalize: MPI is gone again before any worker starts, so a worker's own
// MPI_Init starts afresh.
Result<std::string> MpiShareFromRankZero(const std::string& mine);

// Under mpirun with no endpoint given: rank 0 offers its address (--local-addr,
// else its host name) and a port free there; every rank learns it and sets
// o.rdzv_endpoint, and rank 0 hosts the coordinator. InvalidArgument "under
// mpirun: ... (or give --rdzv-endpoint HOST:PORT)" when that fails.
struct Options;
Status RendezvousThroughMpi(Options& o);

}  // namespace dlaunch::launcher
