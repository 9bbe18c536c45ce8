// Small text helpers shared by the launcher: strict number parsing, splitting,
// signal names, and the edit distance behind "did you mean".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlaunch::launcher {

// The whole of `s` as a decimal int, or nullopt ("4x", "", " 4" all fail).
std::optional<int> ParseInt(std::string_view s);
std::optional<double> ParseDouble(std::string_view s);

// Splits on `sep`, keeping empty pieces ("a,,b" gives three).
std::vector<std::string> Split(std::string_view s, char sep);
std::string Upper(std::string_view s);

// Levenshtein distance, for suggesting a flag.
size_t EditDistance(std::string_view a, std::string_view b);

// "SIGTERM", "TERM" or "15" to 15; 0 when unknown.
int SignalNumber(std::string_view name);
// 15 to "SIGTERM"; "signal N" when unknown.
std::string SignalName(int sig);

}  // namespace dlaunch::launcher
