// --gpus, --multi-prog and a group's -x: what several
// programs in one job say (colon_groups.hpp; groups.hpp puts them in the plan). The
// flag table's setters only validate, with these functions; the readers take
// the values from Options::typed.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.hpp"
#include "envmap/layout.hpp"

namespace dlaunch::launcher {

struct Options;

// "0,1" or "GPU-8f3c...,GPU-1a2b...": ids as CUDA_VISIBLE_DEVICES takes them,
// at most 1,024, each printable without blanks or commas. Fails naming the flag.
Status CheckGpuList(const std::string& value);
Status CheckMultiProg(const std::string& value);

// The ids of the last --gpus typed; empty when none was.
Result<std::vector<std::string>> GroupGpus(const Options& o);
// The file of the last --multi-prog typed; empty when none was.
Result<std::string> MultiProgFile(const Options& o);

// One -x value: NAME=VALUE as given, NAME with the launcher's value in `env`;
// nullopt for a NAME the launcher does not have.
std::optional<std::pair<std::string, std::string>> ExportValue(const std::string& x, const envmap::EnvMap& env);

// -x NAME=VALUE as given, -x NAME with the launcher's value (`env`); a NAME
// the launcher does not have fails, as mpirun's -x does not pass it silently.
Result<envmap::EnvVars> GroupExports(const Options& o, const envmap::EnvMap& env);

}  // namespace dlaunch::launcher
