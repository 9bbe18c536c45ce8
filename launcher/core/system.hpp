// What the launcher learns from the machine: free ports, CPUs, GPUs, hostname.
// Each call is an outside effect; main() calls them once and passes plain values on.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "envmap/layout.hpp"
#include "base/status.hpp"

namespace dlaunch::launcher {

// A port that the kernel confirmed free, held bound (not listening, with
// SO_REUSEADDR) until Release() so that nothing else is handed it meanwhile.
class PortReservation {
 public:
  PortReservation() = default;
  PortReservation(PortReservation&& other) noexcept;
  PortReservation& operator=(PortReservation&& other) noexcept;
  ~PortReservation() { Release(); }
  int port() const { return port_; }
  void Release();

  // Binds port 0 (any free port) on every interface, for a port a worker binds
  // after Release(): until then no other program can bind it, not even one
  // that sets SO_REUSEADDR, and a port some socket still has in TIME_WAIT is
  // never picked, so a worker that binds without SO_REUSEADDR gets it.
  static Result<PortReservation> AnyFree();
  // As AnyFree, but MASTER_PORT's: held for the whole run, and rank 0's store
  // (which sets SO_REUSEADDR, as torch's TCPStore does) binds beside the hold.
  static Result<PortReservation> AnyFreeForStore();
  // Binds `port`. Fails with "--master-port 29500: address already in use" (the
  // subject is `what`) when something listens there.
  static Result<PortReservation> Exactly(int port, const std::string& what);
  // Binds a free port P as AnyFreeForStore and P + 1 as AnyFree (--env horovod:
  // MASTER_PORT and the store's, base::kHorovodStorePortOffset): `next` gets
  // P + 1. Tries 64 free ports.
  static Result<PortReservation> AnyFreeWithNext(PortReservation* next);

 private:
  int fd_ = -1;
  int port_ = 0;
};

// The environment, read once.
envmap::EnvMap ReadEnvironment();
// In a static dlaunch (CMake's opt-in DLAUNCH_STATIC_PIE), host names are
// looked up in /etc/hosts and DNS only, the two services glibc has built in, so
// that no NSS module (myhostname, mdns, sss...) is ever loaded at run time: a
// static program that dlopens a module built for another glibc than its own can
// crash inside getaddrinfo. A dynamic dlaunch does nothing here: it loads the
// modules with the system's own glibc, like any program. Call it first in main().
void KeepHostLookupsBuiltIn();
std::string HostName();
// The uid that files of owners unmapped in this process's user namespace show
// (/proc/sys/kernel/overflowuid, 65534), when this process is in a user
// namespace other than the initial one (/proc/self/uid_map maps less than all
// of 0..4294967294); nullopt in the initial namespace, where it is a real user.
std::optional<uid_t> UnmappedOwner();
// True when `uid_map` (the text of /proc/PID/uid_map) is the initial user
// namespace's: "0 0 4294967295".
bool IsInitialUidMap(std::string_view uid_map);
// `name` in this program's own folder (/proc/self/exe's): where dlaunch's helper
// programs are installed. Empty when /proc/self/exe cannot be read.
std::string ProgramBeside(const std::string& name);
// The network interface this machine would use to reach `host` (a name or an
// address; port unused): "lo" for loopback, "eth0", ...; empty when the route or
// the interface cannot be found. Resolves names (blocking), so call it at the edge.
std::string InterfaceToward(const std::string& host);

// GPUs this process may use: the NVIDIA driver's count, narrowed by
// CUDA_VISIBLE_DEVICES. Returns their ids as CUDA_VISIBLE_DEVICES spells them.
std::vector<std::string> VisibleGpus(const envmap::EnvMap& env);
// The CPUs this process may run on (its affinity mask).
int CpuCount();
// What Python's os.cpu_count() says, which torchrun's `--nproc-per-node auto`
// (without a GPU) and `cpu` take: the online CPUs, sysconf(_SC_NPROCESSORS_ONLN),
// whatever the affinity mask or a cgroup quota allows; PYTHON_CPU_COUNT=N
// overrides it (CPython 3.13+). At least 1.
int PythonCpuCount(const envmap::EnvMap& env);

// CPUs for each local rank under --bind-to core|numa: an equal share of the CPUs
// this process may run on, or the CPUs of NUMA node (local_rank % nodes).
// An empty result means "do not bind".
std::vector<std::vector<int>> CpuPlacement(const std::string& bind_to, int nproc);

}  // namespace dlaunch::launcher
