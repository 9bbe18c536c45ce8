// Small text helpers shared by the launcher: strict number parsing, splitting,
// signal names, the edit distance behind "did you mean", and escaping for
// messages that quote bytes from outside.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlaunch::launcher {

// The whole of `s` as a decimal int, or nullopt ("4x", "", " 4" all fail).
std::optional<int> ParseInt(std::string_view s);
std::optional<double> ParseDouble(std::string_view s);

// The longest duration any flag takes: 30 days.
inline constexpr double kMaxSeconds = 30 * 24 * 3600;

// A number of seconds ("30", "0.5") as milliseconds, rounded up so that a positive
// value stays positive. nullopt unless finite, at most kMaxSeconds, and > 0
// (>= 0 when `allow_zero`): "inf", "nan" and "1e300" all fail.
std::optional<std::chrono::milliseconds> ParseSeconds(std::string_view s, bool allow_zero);

// Splits on `sep`, keeping empty pieces ("a,,b" gives three).
std::vector<std::string> Split(std::string_view s, char sep);
// A duration as seconds, the way a user writes them: "60s", "1.5s", "0.25s".
std::string SecondsText(std::chrono::milliseconds d);
std::string Upper(std::string_view s);

// `s` with every byte outside printable ASCII (0x20-0x7e) written as \xNN, for
// messages that quote a file's content: a binary file must not drive the terminal.
std::string Printable(std::string_view s);
// Printable(s) of at most the first `max` bytes, then "... (N bytes)" when `s`
// is longer: for messages that quote an argument of any size in one short line.
std::string PrintablePrefix(std::string_view s, size_t max);

// `s` as valid UTF-8 that cannot drive a terminal, for JSON replies and the
// status table: each byte of an invalid or overlong sequence, and each control
// character (tab and newline kept when `keep_newlines`), becomes '?'.
std::string SafeUtf8(std::string_view s, bool keep_newlines);

// `s` as valid UTF-8, for JSON that a strict parser must take (--events): each
// byte of an invalid, truncated or overlong sequence becomes U+FFFD; all else,
// control characters included (JSON escapes them), stays as it is.
std::string ValidUtf8(std::string_view s);

// Levenshtein distance, for suggesting a flag.
size_t EditDistance(std::string_view a, std::string_view b);

// "SIGTERM", "TERM" or "15" to 15; 0 when unknown.
int SignalNumber(std::string_view name);
// 15 to "SIGTERM", 9 to "SIGKILL", 36 to "SIGRTMIN+2" (glibc's SIGRTMIN is 34);
// "signal N" for a number that is no signal.
std::string SignalName(int sig);

// "0-2,4,6-7": sorted ranks with runs as ranges.
std::string RankRanges(std::vector<int> ranks);

}  // namespace dlaunch::launcher
