// dlaunch-mpi-bootstrap OFFER: the MPI half of dlaunch's Open MPI bootstrap
// (launcher/modes/mpi_bootstrap.hpp). dlaunch runs it under mpirun, where it inherits
// dlaunch's PMIx identity and so joins MPI_COMM_WORLD as dlaunch's rank.
//
// MPI_Init, rank 0's OFFER broadcast to every rank, MPI_Finalize; then prints
// "RANK SIZE VALUE" on stdout and exits 0. On failure it prints one line on
// stderr and exits 1. Kept to the MPI C API and stdio: it is the only program
// that loads libmpi, and it should load nothing else.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

int Fail(const char* what, int rc) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(rc, text, &len);
  std::fprintf(stderr, "dlaunch-mpi-bootstrap: %s failed (%s)\n", what, text);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || argv[1][0] == '\0') {
    std::fputs("usage: dlaunch-mpi-bootstrap OFFER (dlaunch runs it under mpirun)\n", stderr);
    return 2;
  }
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    std::fputs("dlaunch-mpi-bootstrap: MPI_Init failed\n", stderr);
    return 1;
  }
  // Errors come back as codes rather than aborting the whole job from inside MPI.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int length = rank == 0 ? static_cast<int>(std::strlen(argv[1])) : 0;
  int rc = MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return Fail("MPI_Bcast", rc);
  char* value = static_cast<char*>(std::calloc(static_cast<size_t>(length) + 1, 1));
  if (value == nullptr) return 1;
  if (rank == 0) std::memcpy(value, argv[1], static_cast<size_t>(length));
  rc = MPI_Bcast(value, length, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return Fail("MPI_Bcast", rc);
  MPI_Finalize();
  std::printf("%d %d %s\n", rank, size, value);
  std::free(value);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
