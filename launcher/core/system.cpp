#include "launcher/core/system.hpp"

#include <dirent.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <nss.h>
#include <sched.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "launcher/core/text.hpp"

extern char** environ;

namespace dlaunch::launcher {

PortReservation::PortReservation(PortReservation&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), port_(other.port_) {}

PortReservation& PortReservation::operator=(PortReservation&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = std::exchange(other.fd_, -1);
    port_ = other.port_;
  }
  return *this;
}

void PortReservation::Release() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

namespace {
enum class Reuse {
  kFirst,  // SO_REUSEADDR before bind: a port left in TIME_WAIT is taken too
  kAfter,  // bind strictly, then SO_REUSEADDR: a port is picked that nothing
           // holds, and the store (which sets it too) binds while we hold it
  kNever,  // only ours until released: no SO_REUSEADDR binder gets in
};

Status BindPort(int port, const std::string& what, Reuse reuse, int* fd_out, int* port_out) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Io(fmt::format("{}: socket: {}", what, std::strerror(errno)));
  int one = 1;
  if (reuse == Reuse::kFirst) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    close(fd);
    return Status::InvalidArgument(fmt::format("{}: {}", what, std::strerror(err)));
  }
  if (reuse == Reuse::kAfter) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *fd_out = fd;
  *port_out = ntohs(addr.sin_port);
  return Status::Ok();
}
}  // namespace

Result<PortReservation> PortReservation::AnyFree() {
  PortReservation r;
  if (Status s = BindPort(0, "free port", Reuse::kNever, &r.fd_, &r.port_); !s.ok()) return s;
  return r;
}

Result<PortReservation> PortReservation::AnyFreeForStore() {
  PortReservation r;
  if (Status s = BindPort(0, "free port", Reuse::kAfter, &r.fd_, &r.port_); !s.ok()) return s;
  return r;
}

Result<PortReservation> PortReservation::Exactly(int port, const std::string& what) {
  PortReservation r;
  if (Status s = BindPort(port, what, Reuse::kFirst, &r.fd_, &r.port_); !s.ok()) return s;
  return r;
}

Result<PortReservation> PortReservation::AnyFreeWithNext(PortReservation* next) {
  for (int attempt = 0; attempt < 64; ++attempt) {
    Result<PortReservation> first = AnyFreeForStore();
    if (!first.ok()) return first;
    if (first->port() >= 65535) continue;
    PortReservation second;
    if (!BindPort(first->port() + 1, "free port", Reuse::kNever, &second.fd_, &second.port_).ok()) continue;
    *next = std::move(second);
    return first;
  }
  return Status::Io("free port: found no free port whose next port is free too (64 tries)");
}

void KeepHostLookupsBuiltIn() {
  // A program started through a dynamic loader knows the loader's address; a
  // static one has no loader.
  if (getauxval(AT_BASE) == 0) __nss_configure_lookup("hosts", "files dns");
}

std::string InterfaceToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || found == nullptr) return "";
  std::string name;
  // A connected UDP socket sends nothing, but the kernel picks the route and so
  // the local address; the interface is the one that holds that address.
  int fd = socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  bool routed = fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  if (!routed) return "";
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return "";
  for (ifaddrs* i = ifs; i != nullptr && name.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != local.ss_family) continue;
    if (local.ss_family == AF_INET) {
      if (reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr ==
          reinterpret_cast<sockaddr_in*>(&local)->sin_addr.s_addr)
        name = i->ifa_name;
    } else if (local.ss_family == AF_INET6) {
      if (std::memcmp(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                      &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr, sizeof(in6_addr)) == 0)
        name = i->ifa_name;
    }
  }
  freeifaddrs(ifs);
  return name;
}

envmap::EnvMap ReadEnvironment() {
  envmap::EnvMap env;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    env.emplace(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
  }
  return env;
}

std::string ProgramBeside(const std::string& name) {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : (self.parent_path() / name).string();
}

bool IsInitialUidMap(std::string_view uid_map) {
  // The initial namespace maps all of 0..4294967294 onto itself, in one line.
  unsigned long long inside = 1, outside = 1, count = 0;
  std::string text(uid_map);
  if (std::sscanf(text.c_str(), " %llu %llu %llu", &inside, &outside, &count) != 3) return false;
  return inside == 0 && outside == 0 && count == 4294967295ULL;
}

std::optional<uid_t> UnmappedOwner() {
  std::ifstream map("/proc/self/uid_map");
  std::string text((std::istreambuf_iterator<char>(map)), {});
  if (!map.is_open() || IsInitialUidMap(text)) return std::nullopt;
  unsigned long overflow = 65534;
  std::ifstream("/proc/sys/kernel/overflowuid") >> overflow;
  return static_cast<uid_t>(overflow);
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

std::vector<std::string> VisibleGpus(const envmap::EnvMap& env) {
  int driver_count = 0;
  if (DIR* d = opendir("/proc/driver/nvidia/gpus")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++driver_count;
    closedir(d);
  }
  std::vector<std::string> ids;
  auto it = env.find("CUDA_VISIBLE_DEVICES");
  if (it == env.end()) {
    for (int i = 0; i < driver_count; ++i) ids.push_back(std::to_string(i));
    return ids;
  }
  // CUDA stops at the first invalid entry ("-1" hides every GPU).
  for (const std::string& id : Split(it->second, ',')) {
    if (id.empty() || id[0] == '-') break;
    ids.push_back(id);
  }
  if (driver_count == 0) ids.clear();
  return ids;
}

int CpuCount() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

int PythonCpuCount(const envmap::EnvMap& env) {
  // CPython's os_cpu_count_impl (Modules/posixmodule.c) on Linux: the -X
  // cpu_count / PYTHON_CPU_COUNT override where set (3.13+; "default" means
  // none), else sysconf(_SC_NPROCESSORS_ONLN), which glibc reads from
  // /sys/devices/system/cpu/online.
  if (auto it = env.find("PYTHON_CPU_COUNT"); it != env.end()) {
    std::optional<int> n = ParseInt(it->second);
    if (n && *n > 0) return *n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

namespace {
std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// Parses a sysfs cpulist such as "0-3,8-11".
std::vector<int> ParseCpuList(const std::string& text) {
  std::vector<int> cpus;
  for (const std::string& part : Split(text, ',')) {
    std::vector<std::string> ends = Split(part, '-');
    std::optional<int> lo = ParseInt(ends[0]);
    std::optional<int> hi = ends.size() > 1 ? ParseInt(ends[1]) : lo;
    if (!lo || !hi) continue;
    for (int c = *lo; c <= *hi; ++c) cpus.push_back(c);
  }
  return cpus;
}
}  // namespace

std::vector<std::vector<int>> CpuPlacement(const std::string& bind_to, int nproc) {
  std::vector<std::vector<int>> out;
  std::vector<int> allowed = AllowedCpus();
  if (bind_to == "none" || allowed.empty() || nproc < 1) return out;
  if (bind_to == "core") {
    // Equal contiguous shares; with more ranks than CPUs, ranks share round-robin.
    size_t share = std::max<size_t>(1, allowed.size() / static_cast<size_t>(nproc));
    for (int r = 0; r < nproc; ++r) {
      std::vector<int> mine;
      for (size_t k = 0; k < share; ++k) mine.push_back(allowed[(static_cast<size_t>(r) * share + k) % allowed.size()]);
      out.push_back(mine);
    }
    return out;
  }
  std::vector<std::vector<int>> nodes;
  for (int n = 0;; ++n) {
    std::ifstream f(fmt::format("/sys/devices/system/node/node{}/cpulist", n));
    std::string line;
    if (!f || !std::getline(f, line)) break;
    std::vector<int> cpus;
    for (int c : ParseCpuList(line))
      if (std::find(allowed.begin(), allowed.end(), c) != allowed.end()) cpus.push_back(c);
    if (!cpus.empty()) nodes.push_back(cpus);
  }
  if (nodes.empty()) nodes.push_back(allowed);
  for (int r = 0; r < nproc; ++r) out.push_back(nodes[static_cast<size_t>(r) % nodes.size()]);
  return out;
}

}  // namespace dlaunch::launcher
