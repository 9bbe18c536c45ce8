// torchrun 2.x flags that dlaunch does not take, each refused in one line that
// names what to use instead, rather than as an unknown flag. Read by the
// parser (cli.cpp) for a flag the table (flag_table.hpp) does not know, and for
// its PET_ variable. Internal to launcher/config/.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlaunch::launcher {

// The refusal of torchrun flag `name` (dashed, without "--"): "--numa-binding:
// not supported (torchrun 2.x); use ..."; nullopt when dlaunch has no word on it.
std::optional<std::string> RefusedFlag(std::string_view name);

// Every refused flag's name, for the PET_ variables.
std::vector<std::string_view> RefusedFlagNames();

}  // namespace dlaunch::launcher
