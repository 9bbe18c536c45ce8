#include "launcher/config/straggler_flags.hpp"

#include <cmath>

#include <fmt/format.h>

#include "base/defaults.hpp"
#include "launcher/config/cli.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

Status CheckStragglerWindow(const std::string& value) {
  std::optional<std::chrono::milliseconds> t = ParseSeconds(value, /*allow_zero=*/true);
  // Under a second a window holds too few samples at 10 Hz to compare.
  if (!t || (t->count() > 0 && t->count() < 1000))
    return Status::InvalidArgument(fmt::format("--straggler-window: expected seconds from 1 to {} (0: off), got '{}'",
                                               static_cast<long long>(kMaxSeconds), PrintablePrefix(value, 40)));
  return Status::Ok();
}

Status CheckStragglerAction(const std::string& value) {
  if (value != "report" && value != "stop")
    return Status::InvalidArgument(
        fmt::format("--straggler-action: expected report or stop, got '{}'", PrintablePrefix(value, 40)));
  return Status::Ok();
}

Status CheckStragglerThreshold(const std::string& value) {
  std::optional<double> n = ParseDouble(value);
  if (!n || !std::isfinite(*n) || *n <= 0 || *n >= 100)
    return Status::InvalidArgument(fmt::format(
        "--straggler-threshold: expected a percentage above 0 and under 100, got '{}'", PrintablePrefix(value, 40)));
  return Status::Ok();
}

Status CheckStragglerIgnore(const std::string& value) {
  bool printable = !value.empty() && value.size() <= 256 && Printable(value) == value;
  if (!printable)
    return Status::InvalidArgument(fmt::format("--straggler-ignore: expected a function, file or FILE:LINE, got '{}'",
                                               PrintablePrefix(value, 40)));
  return Status::Ok();
}

Status CheckStragglerFile(const std::string& value) {
  if (value.empty()) return Status::InvalidArgument("--straggler-file: expected a path, got an empty one");
  return Status::Ok();
}

Result<StragglerFlags> StragglerFlagsFor(const Options& typed) {
  StragglerFlags f;
  std::string shaping;  // a flag given that needs detection on
  for (const auto& [name, value] : typed.typed) {
    if (!name.starts_with("straggler-")) continue;
    Status s = Status::Ok();
    if (name == "straggler-window") {
      s = CheckStragglerWindow(value);
      if (s.ok()) f.window = *ParseSeconds(value, /*allow_zero=*/true);
    } else if (name == "straggler-action") {
      s = CheckStragglerAction(value);
      f.stop = value == "stop";
    } else if (name == "straggler-ignore") {
      s = CheckStragglerIgnore(value);
      f.ignore.push_back(value);
    } else if (name == "straggler-threshold") {
      s = CheckStragglerThreshold(value);
      if (s.ok()) f.threshold = *ParseDouble(value) / 100;
    } else if (name == "straggler-native") {
      f.native = true;
    } else if (name == "straggler-file") {
      s = CheckStragglerFile(value);
      f.file = value;
    }
    if (!s.ok()) return s;
    if (name != "straggler-window") shaping = name;
  }
  if (!f.enabled() && !shaping.empty())
    return Status::InvalidArgument(fmt::format("--{}: not with --straggler-window 0 (detection off)", shaping));
  return f;
}

std::string ExplainStraggler(const StragglerFlags& f) {
  if (!f.enabled()) return "straggler: off (--straggler-window 0)\n";
  StragglerFlags defaults;
  bool as_default = f.window == defaults.window && !f.stop && f.ignore.empty() && f.threshold == defaults.threshold &&
                    !f.native && f.file.empty();
  if (as_default) return "";
  std::string out = fmt::format(
      "straggler: Python ranks sample themselves at 10 Hz; compared every {} (--straggler-window), a rank named "
      "when the others lose {}% of their time waiting for it two windows in a row; then {}",
      SecondsText(f.window), static_cast<int>(std::lround(f.threshold * 100)),
      f.stop ? fmt::format("stop the job, exit code {}", base::kExitStraggler) : std::string("report"));
  if (!f.ignore.empty()) out += fmt::format("; ignoring {}", fmt::join(f.ignore, ", "));
  if (f.native) out += "; other ranks sampled from /proc";
  return out + "\n";
}

}  // namespace dlaunch::launcher
