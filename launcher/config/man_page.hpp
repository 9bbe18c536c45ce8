// dlaunch(1), the manual page, made at build time (launcher/docgen) from the
// flag table, the subcommands and the exit codes of base/defaults.hpp, so
// that it says what this dlaunch parses and nothing else.
#pragma once

#include <string>
#include <string_view>

namespace dlaunch::launcher {

// The page in man(7) roff, for `version` ("0.1.0"): synopsis, subcommands,
// every flag with its torchrun and mpirun spelling, the variables dlaunch
// reads and sets, exit status, files and examples.
std::string ManPage(const std::string& version);

// `text` made safe for a roff text line: backslashes, hyphens (so that a flag
// is typed back as ASCII '-') and a leading '.' or '\''.
std::string RoffEscape(std::string_view text);

}  // namespace dlaunch::launcher
