#include "launcher/groups/colon.hpp"

#include <algorithm>
#include <array>

namespace dlaunch::launcher {

namespace {

// What each group says for itself, mpirun's app context options: its count,
// role, command, variables, dialects, hosts and GPUs.
constexpr std::array<std::string_view, 11> kGroupFlags = {
    "nproc-per-node", "np", "role", "export", "env", "host", "hostfile", "gpus", "module", "no-python", "run-path",
};

// "\:" and "\\:": backslashes and a colon, nothing else.
bool EscapedColon(std::string_view arg) {
  return arg.size() >= 2 && arg.back() == ':' && arg.find_first_not_of('\\') == arg.size() - 1;
}

}  // namespace

bool IsGroupFlagName(std::string_view name) {
  return std::find(kGroupFlags.begin(), kGroupFlags.end(), name) != kGroupFlags.end();
}

bool IsGroupFlag(std::string_view arg) {
  if (arg == "-np" || arg.starts_with("-np=")) return true;
  if (arg.starts_with("--")) {
    std::string name(arg.substr(2, arg.find('=') == std::string_view::npos ? std::string_view::npos : arg.find('=') - 2));
    std::replace(name.begin(), name.end(), '_', '-');
    return IsGroupFlagName(name);
  }
  return arg.size() >= 2 && arg[0] == '-' && (arg[1] == 'x' || arg[1] == 'H' || arg[1] == 'm');
}

std::vector<std::vector<std::string>> SplitGroups(const std::vector<std::string>& args) {
  std::vector<std::vector<std::string>> groups(1);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    bool next_opens = i + 1 < args.size() && (args[i + 1] == "--" || IsGroupFlag(args[i + 1]));
    if (arg == ":" && next_opens) {
      groups.emplace_back();
      continue;
    }
    groups.back().push_back(EscapedColon(arg) ? arg.substr(1) : arg);
  }
  return groups;
}

}  // namespace dlaunch::launcher
