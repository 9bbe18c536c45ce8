#include "launcher/mpi_bootstrap.hpp"

#include <fmt/format.h>

#include "launcher/cli.hpp"
#include "launcher/system.hpp"

#if DLAUNCH_HAVE_MPI
#include <mpi.h>
#endif

namespace dlaunch::launcher {

#if DLAUNCH_HAVE_MPI

bool MpiBootstrapAvailable() { return true; }

Result<std::string> MpiShareFromRankZero(const std::string& mine) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return Status::Io("MPI bootstrap: MPI is already initialized");
  if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) return Status::Io("MPI bootstrap: MPI_Init failed");
  // Errors come back as codes rather than aborting the whole job from inside MPI.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string value = rank == 0 ? mine : std::string();
  int size = static_cast<int>(value.size());
  int rc = MPI_Bcast(&size, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rc == MPI_SUCCESS) {
    value.resize(static_cast<size_t>(size));
    rc = MPI_Bcast(value.data(), size, MPI_CHAR, 0, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  if (rc != MPI_SUCCESS) return Status::Io(fmt::format("MPI bootstrap: MPI_Bcast failed (error {})", rc));
  return value;
}

#else

bool MpiBootstrapAvailable() { return false; }

Result<std::string> MpiShareFromRankZero(const std::string&) {
  return Status::InvalidArgument("this dlaunch was built without MPI, so it cannot bootstrap through mpirun");
}

#endif

Status RendezvousThroughMpi(Options& o) {
  Result<PortReservation> port = PortReservation::AnyFree();
  if (!port.ok()) return port.status();
  std::string mine = fmt::format("{}:{}", o.local_addr.empty() ? HostName() : o.local_addr, port->port());
  port->Release();  // the coordinator binds it next
  Result<std::string> endpoint = MpiShareFromRankZero(mine);
  if (!endpoint.ok())
    return Status::InvalidArgument(
        fmt::format("under mpirun: {} (or give --rdzv-endpoint HOST:PORT)", endpoint.status().message()));
  o.rdzv_endpoint = *endpoint;
  o.is_host = o.node_rank == 0;
  return Status::Ok();
}

}  // namespace dlaunch::launcher
