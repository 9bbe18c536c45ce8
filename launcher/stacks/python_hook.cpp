// The stack hook of Python workers (python_hook.hpp): its source, where it is
// written, and which workers get it. The source is stack_hook.py.
#include "launcher/stacks/python_hook.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "launcher/core/private_dir.hpp"
#include "launcher/stacks/stack_hook_py.hpp"  // generated
#include "launcher/stacks/stacks.hpp"

namespace dlaunch::launcher {

namespace {

// The hook: stack_hook.py beside this file, whose bytes the build embeds
// (launcher/process/CMakeLists.txt); the worker gets exactly that file. Python,
// because it runs inside the worker's interpreter; kept to what every Python 3
// has (3.6 to 3.13 run it in test_stack_hook). What it does at start is what it
// must: open its dump file (dlaunch's proof that it lives), register
// faulthandler, block the signal in the main thread and start the one thread
// that takes it (the sampler's, else an idle one), then write the header line
// that lets dlaunch signal it.
// faulthandler does the rest from C when dlaunch asks for stacks.
constexpr std::string_view kPythonHook = kStackHookPy;

// FNV-1a: a name for the hook's text, not a defence (the directory is this
// user's alone); 64 bits make two hooks sharing one name a non-event.
constexpr uint64_t Fnv1a(std::string_view text) {
  uint64_t h = 14695981039346656037ull;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// Whether `path` is a regular file (not a link) holding exactly `text`.
bool Holds(const std::string& path, std::string_view text) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  struct stat st {};
  bool same = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) == text.size();
  std::string got(text.size(), '\0');
  size_t at = 0;
  while (same && at < got.size()) {
    ssize_t n = read(fd, got.data() + at, got.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      same = false;
    else
      at += static_cast<size_t>(n);
  }
  close(fd);
  return same && got == text;
}

bool ContainsNoCase(std::string_view text, std::string_view word) {
  auto it = std::search(text.begin(), text.end(), word.begin(), word.end(),
                        [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
  return it != text.end();
}

bool NamesPython(std::string_view text) { return ContainsNoCase(text, "python") || ContainsNoCase(text, "pypy"); }

std::string_view BaseName(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool IsShell(std::string_view name) {
  static constexpr std::string_view kShells[] = {"sh", "bash", "dash", "zsh", "ksh", "mksh"};
  return std::find(std::begin(kShells), std::end(kShells), name) != std::end(kShells);
}

// The interpreter a "#!" line names: its program, or env's first argument.
std::string_view ShebangProgram(std::string_view head) {
  std::string_view line = head.substr(2);
  line = line.substr(0, line.find('\n'));
  auto word = [&line]() {
    size_t b = line.find_first_not_of(" \t");
    if (b == line.npos) return std::string_view();
    size_t e = line.find_first_of(" \t", b);
    std::string_view w = line.substr(b, e == line.npos ? line.npos : e - b);
    line = e == line.npos ? std::string_view() : line.substr(e);
    return w;
  };
  std::string_view program = BaseName(word());
  return program == "env" ? BaseName(word()) : program;
}

}  // namespace

std::string_view PythonHookSource() { return kPythonHook; }

std::string PythonHookDir(const std::string& user_dir) {
  return fmt::format("{}/hook-{:016x}", user_dir, Fnv1a(kPythonHook));
}

Status WritePythonHook(const std::string& hook_dir) {
  // Python imports whatever it finds in hook_dir as this user's own code: only
  // a directory of ours that nobody else can write (private_dir.hpp).
  if (Status s = EnsureOwnDir(hook_dir); !s.ok()) return s;
  std::string path = hook_dir + "/sitecustomize.py";
  if (Holds(path, kPythonHook)) return Status::Ok();
  Result<std::string> tmp = WriteTempFile(hook_dir, ".sitecustomize-", ".tmp", kPythonHook);
  if (!tmp.ok()) return tmp.status();
  if (rename(tmp->c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp->c_str());
    return Status::Io(fmt::format("{}: cannot write ({})", path, std::strerror(err)));
  }
  return Status::Ok();
}

void AddPythonHook(envmap::EnvMap& env, const std::string& hook_dir, const std::string& dumps_dir) {
  auto it = env.find("PYTHONPATH");
  env["PYTHONPATH"] = it == env.end() || it->second.empty() ? hook_dir : hook_dir + ":" + it->second;
  env["DLAUNCH_STACKS_DIR"] = dumps_dir;
  env["DLAUNCH_STACKS_SIGNAL"] = std::to_string(StackSignal());
}

void AddSampler(envmap::EnvMap& env, std::chrono::milliseconds period, std::chrono::milliseconds flush) {
  env.erase("DLAUNCH_SAMPLE_PERIOD_MS");
  env.erase("DLAUNCH_SAMPLE_FLUSH_MS");
  if (period.count() <= 0) return;
  env["DLAUNCH_SAMPLE_PERIOD_MS"] = std::to_string(period.count());
  env["DLAUNCH_SAMPLE_FLUSH_MS"] = std::to_string(flush.count());
}

bool CommandNamesPython(std::string_view exe, const std::vector<std::string>& argv) {
  if (NamesPython(BaseName(exe))) return true;
  if (std::any_of(argv.begin(), argv.end(), [](const std::string& a) { return NamesPython(a); })) return true;
  // A shell running a script file (`bash run.sh`): what the script starts is
  // not known, and wrappers that start Python are common. `sh -c TEXT` is
  // judged by its text above.
  return IsShell(BaseName(exe)) && std::find(argv.begin(), argv.end(), "-c") == argv.end();
}

bool ShebangNamesPython(std::string_view head) {
  return head.starts_with("#!") && (NamesPython(head) || IsShell(ShebangProgram(head)));
}

std::string ReadHead(const std::string& path) {
  std::string out(512, '\0');
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ssize_t n = -1;
  if (fd >= 0) {
    do n = read(fd, out.data(), out.size());
    while (n < 0 && errno == EINTR);
    close(fd);
  }
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

}  // namespace dlaunch::launcher
