// The command line's flag table: every flag's long and short name, how it takes
// a value, what it sets in Options, and its help line. The parser (cli.cpp)
// reads it, and so does everything generated from it (--help; later the man
// page and the shell completion), so that none can drift from the others.
// Internal to launcher/config/.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "envmap/status.hpp"
#include "launcher/config/cli.hpp"

namespace dlaunch::launcher {

enum class Arity { kSwitch, kValue, kOptionalValue /* only as --flag=value */ };

using Setter = std::function<Status(Options&, const std::string& value)>;

struct Flag {
  const char* name;  // canonical, dashed, without the leading "--"
  char short_name;   // 0 when none
  Arity arity;
  Setter set;
  const char* help;
};

// Every flag, in --help's order.
const std::vector<Flag>& Flags();
// The flag named `name` (long, dashed) or short `c`; null when none.
const Flag* FindFlag(std::string_view name);
const Flag* FindShort(char c);
// Flags that fix the layout: with any of them, the surroundings are not consulted.
bool IsLayoutFlag(std::string_view name);
// --role-env ROLE:NAME=VALUE, also read from a head's DLAUNCH_ROLE_ENV_<i>.
Status AddRoleEnv(Options& o, const std::string& v);

}  // namespace dlaunch::launcher
