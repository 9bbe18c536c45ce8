// torch 2.x's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, as a console tag. torch
// fills it with string.Template's safe_substitute: ${role_name}, ${rank} and
// ${local_rank} (also without braces), $$ for a dollar. dlaunch turns it into the
// tag format of --tag-output (launcher/core/output.hpp RenderTag), which renders
// it for every line. Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/status.hpp"
#include "envmap/layout.hpp"

namespace dlaunch::launcher {

inline constexpr std::string_view kLogLinePrefixVar = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE";

// The tag format for `tmpl`: "[${role_name}${local_rank}]: " gives
// "[{role}{local_rank}]: ". Fails naming the variable and the field for any
// other ${...} (safe_substitute would leave it as typed, in every line).
Result<std::string> TagFromLogLinePrefix(std::string_view tmpl);

// The tag the environment asks for: kLogLinePrefixVar's, translated; nullopt
// when it is unset or empty (torch ignores an empty template too).
Result<std::optional<std::string>> TagFromEnvironment(const envmap::EnvMap& env);

}  // namespace dlaunch::launcher
