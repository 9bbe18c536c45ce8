// Real processes: spawning a worker in its own process group, pipes and
// resolving a command. Below launcher/process/ (its watchdog, supervision and
// runner) so that the stack collector (launcher/stacks/) can start gdb too.
#pragma once

#include <string>
#include <vector>

#include "base/status.hpp"

namespace dlaunch::launcher {

struct SpawnSpec {
  std::string exe;                // resolved path (ResolveCommand)
  std::vector<std::string> args;  // argv[1..]
  std::vector<std::string> env;   // the whole environment, "NAME=VALUE"
  int stdin_fd = -1;              // child's stdin; -1: inherit
  int stdout_fd = -1;             // child's stdout; -1: inherit
  int stderr_fd = -1;
  std::vector<int> cpus;          // CPU affinity; empty: inherit
  bool die_with_launcher = true;  // PR_SET_PDEATHSIG; false only for the watchdog, which outlives it
  int keep_fd = -1;               // a descriptor (3 or above) the child keeps, at its number; -1: none
};

// Starts a worker as the leader of a new process group, with PR_SET_PDEATHSIG
// so that it dies with the launcher (unless !die_with_launcher), holding none of
// the launcher's descriptors but its stdin, stdout and stderr (and keep_fd). Returns its pid, or Io naming the command.
// Call from the main thread only: PDEATHSIG fires when the forking *thread* exits.
Result<int> SpawnWorker(const SpawnSpec& spec);

// A pipe whose both ends are close-on-exec, so no worker inherits another's.
struct Pipe {
  int read_fd = -1;
  int write_fd = -1;
};
Result<Pipe> MakePipe();

// A child started by SpawnPiped: its pid and the parent's ends of its pipes,
// which the caller owns (-1 where there is none).
struct PipedChild {
  int pid = -1;
  int stdin_fd = -1;   // the write end, with `with_stdin`
  int stdout_fd = -1;  // the read end
  int stderr_fd = -1;  // the read end
};
// SpawnWorker with the child's stdout and stderr, and its stdin when
// `with_stdin`, on new pipes (the spec's own descriptors for them are replaced).
// On failure nothing is left open. The same rule as SpawnWorker: main thread only.
Result<PipedChild> SpawnPiped(SpawnSpec spec, bool with_stdin);

// Finds `name` the way execvp would (PATH, or as a path when it has a '/').
// Returns NotFound "NAME: command not found" or InvalidArgument "NAME: not executable".
Result<std::string> ResolveCommand(const std::string& name);

}  // namespace dlaunch::launcher
