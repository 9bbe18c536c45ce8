// Turns the user's command into a worker's argv, the way torchrun does: a script
// gets the interpreter prepended, -m runs a module, --no-python and anything after
// `--` run as given.
#pragma once

#include <string>
#include <vector>

#include "envmap/layout.hpp"
#include "launcher/config/cli.hpp"

namespace dlaunch::launcher {

// The interpreter torchrun-style commands use: $PYTHON_EXEC, else "python3".
std::string PythonExecutable(const envmap::EnvMap& env);

// argv[0] is the program as the user would type it (resolve it with ResolveCommand).
std::vector<std::string> WorkerArgv(const Options& options, const envmap::EnvMap& env);

// Where torch.distributed.launch's --local-rank=N goes in `argv` (WorkerArgv's):
// right after the script, or at the end for a command run as given.
size_t LocalRankArgAt(const Options& options, const std::vector<std::string>& argv);

}  // namespace dlaunch::launcher
