#include "launcher/config/role_restarts.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "launcher/config/cli.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {
namespace {

constexpr std::string_view kFlag = "role-restarts";

Status Refused(std::string_view what, std::string_view value) {
  return Status::InvalidArgument(fmt::format("--{}: expected {}, got '{}'", kFlag, what, PrintablePrefix(value, 64)));
}

// A role's name as the user may type it: the bytes a terminal shows as they
// are, and no space, so that a message quoting it reads unambiguously.
bool PrintableName(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c <= '~'; });
}

}  // namespace

Result<std::pair<std::string, int>> ParseRoleRestarts(std::string_view value) {
  size_t eq = value.find('=');
  if (eq == std::string_view::npos || eq == 0) return Refused("ROLE=N", value);
  std::string_view role = value.substr(0, eq), count = value.substr(eq + 1);
  if (!PrintableName(role)) return Refused("ROLE=N with ROLE a name of printable characters", value);
  // Digits only: ParseInt would take a sign, and "-1" is the table's "none".
  bool digits = !count.empty() && std::all_of(count.begin(), count.end(), [](char c) { return c >= '0' && c <= '9'; });
  std::optional<int> n = digits ? ParseInt(count) : std::nullopt;
  if (!n || *n > kMaxRoleRestarts)
    return Refused(fmt::format("ROLE=N with N a whole number from 0 to {}", kMaxRoleRestarts), value);
  return std::pair<std::string, int>{std::string(role), *n};
}

Result<std::map<std::string, int>> RoleRestartsFor(const Options& options) {
  std::map<std::string, int> out;
  std::map<std::string, std::string> typed_as;  // role -> the value that gave it
  for (const auto& [name, value] : options.typed) {
    if (name != kFlag) continue;
    Result<std::pair<std::string, int>> one = ParseRoleRestarts(value);
    if (!one.ok()) return one.status();
    auto [it, fresh] = typed_as.emplace(one->first, value);
    if (!fresh)
      return Status::InvalidArgument(fmt::format("--{}: role '{}' is given twice ('{}', '{}')", kFlag, one->first,
                                                 Printable(it->second), Printable(value)));
    out[one->first] = one->second;
  }
  return out;
}

}  // namespace dlaunch::launcher
