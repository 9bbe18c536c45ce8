#include "launcher/core/getent_hosts.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

extern char** environ;

namespace dlaunch::launcher {

namespace {

// The most output read: a name with a few hundred addresses fits.
constexpr size_t kMaxOutput = 64 * 1024;

bool IsAddress(const std::string& text) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, text.c_str(), buf) == 1 || inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

}  // namespace

std::vector<std::string> ParseGetentAhosts(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    size_t b = line.find_first_not_of(" \t");
    if (b == std::string_view::npos) continue;
    size_t e = line.find_first_of(" \t\r", b);
    std::string addr(line.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
    if (!IsAddress(addr) || std::find(out.begin(), out.end(), addr) != out.end()) continue;
    out.push_back(std::move(addr));
  }
  return out;
}

const char* GetentDatabase(int family) {
  if (family == AF_INET) return "ahostsv4";
  if (family == AF_INET6) return "ahostsv6";
  return "ahosts";
}

std::string FindGetent() {
  for (const char* path : {"/usr/bin/getent", "/bin/getent"})
    if (access(path, X_OK) == 0) return path;
  return "";
}

Result<std::vector<std::string>> GetentAhosts(const std::string& getent_path, const std::string& name, int family) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Status::Io(fmt::format("getent: no pipe ({})", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  // Signals the launcher catches would otherwise stay blocked or caught in it.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::string database = GetentDatabase(family);
  std::string program = getent_path;
  char* argv[] = {program.data(), database.data(), const_cast<char*>(name.c_str()), nullptr};
  pid_t pid = -1;
  int err = posix_spawn(&pid, getent_path.c_str(), &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  if (err != 0) {
    close(out[0]);
    return Status::Io(fmt::format("{}: cannot run ({})", getent_path, std::strerror(err)));
  }
  std::string text;
  char buf[4096];
  while (text.size() < kMaxOutput) {
    ssize_t n = read(out[0], buf, std::min(sizeof buf, kMaxOutput - text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);  // past the limit: getent gets EPIPE and ends
  // The launcher reaps every child with waitpid(-1) and may collect this one
  // first (ECHILD here): the output says all that is needed.
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  std::vector<std::string> addrs = ParseGetentAhosts(text);
  if (addrs.empty()) return Status::NotFound(fmt::format("{} {} {}: no address", getent_path, database, name));
  return addrs;
}

Result<std::vector<std::string>> GetentCache::Lookup(const std::string& name, int family, Clock::time_point now) {
  std::pair<std::string, int> key{name, family};
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end() && now - it->second.at < ttl_) return it->second.answer;
  }
  // getent runs unlocked: a slow name service holds no other lookup.
  Result<std::vector<std::string>> answer = run_(name, family);
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.size() >= kMaxEntries && !entries_.contains(key)) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                   [](const auto& a, const auto& b) { return a.second.at < b.second.at; });
    entries_.erase(oldest);
  }
  entries_.insert_or_assign(key, Entry{answer, now});
  return answer;
}

}  // namespace dlaunch::launcher
