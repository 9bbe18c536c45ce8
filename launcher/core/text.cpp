#include "launcher/core/text.hpp"

#include <cstdint>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace dlaunch::launcher {

namespace {
// The whole of `s` as a T: from_chars, and nothing left over.
template <typename T>
std::optional<T> ParseWhole(std::string_view s) {
  T v{};
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}
}  // namespace

std::optional<int> ParseInt(std::string_view s) { return ParseWhole<int>(s); }
std::optional<double> ParseDouble(std::string_view s) { return ParseWhole<double>(s); }

std::optional<std::chrono::milliseconds> ParseSeconds(std::string_view s, bool allow_zero) {
  std::optional<double> secs = ParseDouble(s);
  // The negated comparisons also refuse NaN, which compares false to everything.
  if (!secs || !(*secs >= 0) || !(*secs <= kMaxSeconds) || (*secs == 0 && !allow_zero)) return std::nullopt;
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(*secs * 1000)));
}

std::string Printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f)
      out += c;
    else
      out += fmt::format("\\x{:02x}", byte);
  }
  return out;
}

std::string PrintablePrefix(std::string_view s, size_t max) {
  if (s.size() <= max) return Printable(s);
  return fmt::format("{}... ({} bytes)", Printable(s.substr(0, max)), s.size());
}

namespace {
// The length of the well-formed UTF-8 sequence at s[i] (a lead byte >= 0x80),
// with its code point in `cp`; 0 when it is invalid, truncated or overlong.
size_t Utf8SequenceAt(std::string_view s, size_t i, uint32_t& cp) {
  auto b = static_cast<unsigned char>(s[i]);
  // The length and smallest value of the sequence this lead byte starts.
  size_t len = b >= 0xc2 && b <= 0xdf ? 2 : (b & 0xf0) == 0xe0 ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
  cp = len == 2 ? b & 0x1fu : len == 3 ? b & 0x0fu : b & 0x07u;
  bool ok = len > 0 && i + len <= s.size();
  for (size_t k = 1; ok && k < len; ++k) {
    auto c = static_cast<unsigned char>(s[i + k]);
    ok = (c & 0xc0) == 0x80;
    cp = (cp << 6) | (c & 0x3fu);
  }
  ok = ok && !(len == 3 && cp < 0x800) && !(len == 4 && (cp < 0x10000 || cp > 0x10ffff)) &&
       !(cp >= 0xd800 && cp <= 0xdfff);
  return ok ? len : 0;
}
}  // namespace

std::string SafeUtf8(std::string_view s, bool keep_newlines) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      bool control = b < 0x20 || b == 0x7f;
      out += control && !(keep_newlines && (b == '\n' || b == '\t')) ? '?' : s[i];
      ++i;
      continue;
    }
    uint32_t cp = 0;
    size_t len = Utf8SequenceAt(s, i, cp);
    if (len > 0 && !(cp >= 0x80 && cp < 0xa0)) {  // C1 controls drive a terminal too
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += '?';
      ++i;
    }
  }
  return out;
}

std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    size_t len = static_cast<unsigned char>(s[i]) < 0x80 ? 1 : Utf8SequenceAt(s, i, cp);
    if (len > 0) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xef\xbf\xbd";  // U+FFFD REPLACEMENT CHARACTER
      ++i;
    }
  }
  return out;
}

std::string SecondsText(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{}s", d.count() / 1000);  // no exponent for 30 days
  return fmt::format("{:g}s", std::chrono::duration<double>(d).count());
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    out.emplace_back(s.substr(start, pos - start));
    if (pos == std::string_view::npos) return out;
    start = pos + 1;
  }
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

namespace {
struct SignalEntry {
  int sig;
  const char* name;
};
constexpr SignalEntry kSignals[] = {
    {SIGHUP, "SIGHUP"},     {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},     {SIGILL, "SIGILL"},
    {SIGTRAP, "SIGTRAP"},   {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},       {SIGFPE, "SIGFPE"},
    {SIGKILL, "SIGKILL"},   {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"},     {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"},   {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},     {SIGCHLD, "SIGCHLD"},
    {SIGCONT, "SIGCONT"},   {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"},     {SIGXCPU, "SIGXCPU"},
    {SIGXFSZ, "SIGXFSZ"},   {SIGSYS, "SIGSYS"},   {SIGSTKFLT, "SIGSTKFLT"}, {SIGTTIN, "SIGTTIN"},
    {SIGTTOU, "SIGTTOU"},   {SIGURG, "SIGURG"},   {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"},
    {SIGWINCH, "SIGWINCH"}, {SIGIO, "SIGIO"},     {SIGPWR, "SIGPWR"},
};
}  // namespace

int SignalNumber(std::string_view name) {
  if (std::optional<int> n = ParseInt(name)) return (*n > 0 && *n < NSIG) ? *n : 0;
  std::string upper = Upper(name);
  for (const SignalEntry& e : kSignals)
    if (upper == e.name || upper == e.name + 3) return e.sig;
  return 0;
}

std::string SignalName(int sig) {
  for (const SignalEntry& e : kSignals)
    if (e.sig == sig) return e.name;
  // Python's signal.Signals, which torch's failure report uses, names these the same way.
  if (sig == SIGRTMIN) return "SIGRTMIN";
  if (sig == SIGRTMAX) return "SIGRTMAX";
  if (sig > SIGRTMIN && sig < SIGRTMAX) return fmt::format("SIGRTMIN+{}", sig - SIGRTMIN);
  return fmt::format("signal {}", sig);
}

std::string RankRanges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace dlaunch::launcher
