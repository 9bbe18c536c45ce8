#include "launcher/config/health_flags.hpp"

#include <fmt/format.h>

#include "launcher/config/cli.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

namespace {

std::optional<std::chrono::milliseconds> Seconds(const std::string& value) {
  std::optional<std::chrono::milliseconds> t = ParseSeconds(value, /*allow_zero=*/false);
  if (!t || *t < std::chrono::seconds(1)) return std::nullopt;
  return t;
}

}  // namespace

Status CheckHealthCommand(const std::string& value) {
  if (value.find_first_not_of(" \t") == std::string::npos)
    return Status::InvalidArgument("--health-check: expected a shell command, got an empty one");
  return Status::Ok();
}

Status CheckHealthSeconds(const std::string& flag, const std::string& value) {
  if (!Seconds(value))
    return Status::InvalidArgument(fmt::format("--{}: expected seconds from 1 to {}, got '{}'", flag,
                                               static_cast<long long>(kMaxSeconds), PrintablePrefix(value, 40)));
  return Status::Ok();
}

Result<HealthCheckPlan> HealthCheckFor(const Options& typed) {
  HealthCheckPlan plan;
  std::string timing;  // a timing flag given, for the message when the check is not
  for (const auto& [name, value] : typed.typed) {
    if (name == "health-check") {
      if (Status s = CheckHealthCommand(value); !s.ok()) return s;
      plan.command = value;
    } else if (name == "health-check-timeout" || name == "health-check-interval") {
      if (Status s = CheckHealthSeconds(name, value); !s.ok()) return s;
      (name == "health-check-timeout" ? plan.timeout : plan.interval) = *Seconds(value);
      timing = name;
    }
  }
  if (!plan.enabled() && !timing.empty())
    return Status::InvalidArgument(fmt::format("--{}: only with --health-check CMD", timing));
  return plan;
}

std::string ExplainHealthCheck(const HealthCheckPlan& plan) {
  if (!plan.enabled()) return "";
  return fmt::format(
      "health check: '{}' before joining (timeout {}; again every {} while held out, and before a "
      "restart)\n",
      PrintablePrefix(plan.command, 80), SecondsText(plan.timeout), SecondsText(plan.interval));
}

}  // namespace dlaunch::launcher
