#include "launcher/config/program_flags.hpp"

#include <fmt/format.h>

#include "launcher/config/cli.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

namespace {

// More ids than any machine has GPUs; a longer list is a mistake, not a node.
constexpr size_t kMaxGpuIds = 1024;

}  // namespace

Status CheckGpuList(const std::string& value) {
  std::vector<std::string> ids = Split(value, ',');
  bool ok = !value.empty() && ids.size() <= kMaxGpuIds;
  for (const std::string& id : ids)
    ok = ok && !id.empty() && id.size() <= 96 && Printable(id) == id && id.find(' ') == std::string::npos;
  if (!ok)
    return Status::InvalidArgument(
        fmt::format("--gpus: expected GPU ids like 0,1 or GPU-UUID,... (at most {}), got '{}'", kMaxGpuIds,
                    PrintablePrefix(value, 40)));
  return Status::Ok();
}

Status CheckMultiProg(const std::string& value) {
  if (value.empty()) return Status::InvalidArgument("--multi-prog: expected a file, got an empty name");
  return Status::Ok();
}

Result<std::vector<std::string>> GroupGpus(const Options& o) {
  std::vector<std::string> gpus;
  for (const auto& [name, value] : o.typed) {
    if (name != "gpus") continue;
    if (Status s = CheckGpuList(value); !s.ok()) return s;
    gpus = Split(value, ',');
  }
  return gpus;
}

Result<std::string> MultiProgFile(const Options& o) {
  std::string file;
  for (const auto& [name, value] : o.typed) {
    if (name != "multi-prog") continue;
    if (Status s = CheckMultiProg(value); !s.ok()) return s;
    file = value;
  }
  return file;
}

std::optional<std::pair<std::string, std::string>> ExportValue(const std::string& x, const envmap::EnvMap& env) {
  if (size_t eq = x.find('='); eq != std::string::npos) return std::pair{x.substr(0, eq), x.substr(eq + 1)};
  auto it = env.find(x);
  if (it == env.end()) return std::nullopt;
  return std::pair{x, it->second};
}

Result<envmap::EnvVars> GroupExports(const Options& o, const envmap::EnvMap& env) {
  envmap::EnvVars vars;
  for (const std::string& x : o.exports) {
    std::optional<std::pair<std::string, std::string>> value = ExportValue(x, env);
    if (!value) return Status::InvalidArgument(fmt::format("-x {}: not set here, so there is no value to pass", x));
    vars.push_back(std::move(*value));
  }
  return vars;
}

}  // namespace dlaunch::launcher
