// The Open MPI bootstrap: when mpirun starts dlaunch (one per node, or one per
// worker) and nothing names a rendezvous endpoint, the ranks agree on one
// through MPI itself: rank 0 offers "host:port", every rank learns it.
//
// libmpi is not linked into dlaunch: resolving it and its dozen dependencies
// cost every start about 15 ms of CPU (perf stat, `dlaunch --version`: 9 ms
// without, 24 ms with), most runs never need it, and the build
// works without MPI. The MPI half is a small program of its own,
// dlaunch-mpi-bootstrap (launcher/mpi_bootstrap/main.cpp), built where CMake
// finds MPI and placed beside dlaunch. dlaunch runs it only when the bootstrap
// is needed; the child inherits dlaunch's PMIx identity (PMIX_RANK,
// PMIX_NAMESPACE, PMIX_SERVER_URI*), so its MPI_Init joins as dlaunch's rank.
// It calls MPI_Finalize and exits before any worker starts, so a worker's own
// MPI_Init starts afresh.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/status.hpp"
#include "launcher/config/plan.hpp"

namespace dlaunch::launcher {

// The helper's name, looked for in the directory of the running dlaunch.
inline constexpr const char* kMpiBootstrapName = "dlaunch-mpi-bootstrap";

// What the helper reports: its MPI rank and size, and rank 0's offer.
struct MpiShared {
  int rank = 0;
  int size = 0;
  std::string value;
};

// Parses the helper's one line, "RANK SIZE VALUE" (newline optional). Fails with
// InvalidArgument "dlaunch-mpi-bootstrap: expected 'RANK SIZE VALUE', got '...'".
Result<MpiShared> ParseMpiBootstrapLine(std::string_view line);

// Runs `helper OFFER` and reads its line. Every rank calls it; each gets rank
// 0's offer. Fails with NotFound when `helper` is missing, Timeout when no line
// came within `limit` (the helper is killed), Io when it exits without one.
// Call it before any thread or worker starts: it forks.
Result<MpiShared> MpiShareFromRankZero(const std::string& helper, const std::string& offer,
                                       std::chrono::milliseconds limit);

// Under mpirun with no endpoint given: rank 0 offers its address (--local-addr,
// else its host name) and a port free there; every rank returns it, and rank 0
// hosts the coordinator there (SetMpiEndpoint). Fails with InvalidArgument
// "under mpirun: ... (or give --rdzv-endpoint HOST:PORT)".
Result<std::string> EndpointThroughMpi(const RendezvousPlan& rendezvous);

}  // namespace dlaunch::launcher
