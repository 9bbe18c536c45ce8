// The command line's flag table: every flag's long and short name, how it takes
// a value, what it sets in Options, its help line and its documentation. The
// parser (cli.cpp) reads it, and so does everything generated from it (--help,
// the man page and the bash completion, which the build makes with
// launcher/docgen), so that none can drift from the others.
// Internal to launcher/config/.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "launcher/config/cli.hpp"

namespace dlaunch::launcher {

enum class Arity { kSwitch, kValue, kOptionalValue /* only as --flag=value */ };

using Setter = std::function<Status(Options&, const std::string& value)>;

// What the shell offers for a flag's value (besides FlagDoc::choices).
enum class ValueKind { kText, kFile, kDirectory, kHost };

// What --help, the man page and the completion say about a flag beyond its help line.
struct FlagDoc {
  const char* value = "V";   // the value's name: N, FILE, HOST:PORT (unused for a switch)
  const char* choices = "";  // the enumerated values, space-separated; each one parses (a unit test holds it)
  ValueKind kind = ValueKind::kText;
  bool torchrun = false;    // torchrun has the flag too, spelt --a_b or --a-b
  const char* others = "";  // its spelling in mpirun, DeepSpeed or torch.distributed.launch, launcher first
};

struct Flag {
  const char* name;  // canonical, dashed, without the leading "--"
  char short_name;   // 0 when none
  Arity arity;
  Setter set;
  const char* help;
  FlagDoc doc = {};
};

// Every flag, in --help's order.
const std::vector<Flag>& Flags();
// The flag named `name` (long, dashed) or short `c`; null when none.
const Flag* FindFlag(std::string_view name);
const Flag* FindShort(char c);
// "--nproc-per-node N", "--tag-output[=FMT]", "--explain": the flag as --help shows it.
std::string FlagSynopsis(const Flag& f);
// Flags that fix the layout: with any of them, the surroundings are not consulted.
bool IsLayoutFlag(std::string_view name);
// --role-env ROLE:NAME=VALUE, also read from a head's DLAUNCH_ROLE_ENV_<i>.
Status AddRoleEnv(Options& o, const std::string& v);

}  // namespace dlaunch::launcher
