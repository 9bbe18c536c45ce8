// The parsers of stacks.hpp: faulthandler's and gdb's text, and the hook's
// header line. All of it is written by the worker (or by gdb about the
// worker), so it is scanned by hand, in one pass per line with no
// backtracking: std::regex recurses once per character and a 1 MB C++ symbol
// overflows dlaunch's stack (issue 18). Every field is cut to kMaxStackText.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/core/text.hpp"
#include "launcher/stacks/stacks.hpp"

namespace dlaunch::launcher {

namespace {

std::string Base(std::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string Field(std::string_view s) { return std::string(s.substr(0, kMaxStackText)); }

// The next line of `text` from `pos` (without its '\n'), moving `pos` past it.
bool NextLine(std::string_view text, size_t& pos, std::string_view& line) {
  if (pos >= text.size()) return false;
  size_t end = text.find('\n', pos);
  if (end == std::string_view::npos) end = text.size();
  line = text.substr(pos, end - pos);
  pos = end + 1;
  return true;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// The run of digits at the start of `s` (possibly empty).
std::string_view Digits(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && IsDigit(s[n])) ++n;
  return s.substr(0, n);
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// `  File "PATH", line N in FUNCTION`. PATH may itself hold `", line `, so the
// last such separator followed by digits and " in " ends it.
std::optional<Frame> FaulthandlerFrame(std::string_view line) {
  if (line.empty() || !IsSpace(line[0])) return std::nullopt;
  size_t start = line.find_first_not_of(" \t\r\v\f");
  if (start == std::string_view::npos) return std::nullopt;
  line.remove_prefix(start);
  constexpr std::string_view kFile = "File \"", kLine = "\", line ", kIn = " in ";
  if (!line.starts_with(kFile)) return std::nullopt;
  line.remove_prefix(kFile.size());
  for (size_t sep = line.rfind(kLine); sep != std::string_view::npos;
       sep = sep == 0 ? std::string_view::npos : line.rfind(kLine, sep - 1)) {
    std::string_view rest = line.substr(sep + kLine.size());
    std::string_view digits = Digits(rest);
    if (digits.empty() || !rest.substr(digits.size()).starts_with(kIn)) continue;
    std::optional<int> n = ParseInt(digits);
    return Frame{Field(rest.substr(digits.size() + kIn.size())), Field(Base(line.substr(0, sep))), n.value_or(0)};
  }
  return std::nullopt;
}

// `Thread 2 (Thread 0x7f1b (LWP 4243) "name"):`: the LWP, or nullopt when the
// line is not a thread's header.
std::optional<int> GdbThread(std::string_view line) {
  constexpr std::string_view kThread = "Thread ", kLwp = "LWP ";
  if (!line.starts_with(kThread)) return std::nullopt;
  std::string_view rest = line.substr(kThread.size());
  std::string_view number = Digits(rest);
  if (number.empty() || !rest.substr(number.size()).starts_with(" (")) return std::nullopt;
  rest.remove_prefix(number.size() + 2);
  for (size_t at = rest.rfind(kLwp); at != std::string_view::npos;
       at = at == 0 ? std::string_view::npos : rest.rfind(kLwp, at - 1)) {
    std::string_view lwp = Digits(rest.substr(at + kLwp.size()));
    if (lwp.empty() || rest.substr(at + kLwp.size() + lwp.size(), 1) != ")") continue;
    return ParseInt(lwp).value_or(-1);
  }
  return std::nullopt;
}

// `#2  0x... in step (x=1) at train.c:12`, `#0  clock_nanosleep () from
// /lib/libc.so.6`, `#3  0x... in ?? ()`: the function runs to the first " (",
// the arguments to the ')' before the location, which is read from the end.
std::optional<Frame> GdbFrame(std::string_view line) {
  if (!line.starts_with('#')) return std::nullopt;
  std::string_view rest = line.substr(1);
  std::string_view number = Digits(rest);
  if (number.empty()) return std::nullopt;
  rest.remove_prefix(number.size());
  if (rest.empty() || !IsSpace(rest[0])) return std::nullopt;
  while (!rest.empty() && IsSpace(rest[0])) rest.remove_prefix(1);
  if (rest.starts_with("0x")) {
    size_t in = rest.find(" in ");
    if (in == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(in + 4);
  }
  size_t open = rest.find(" (");
  if (open == 0 || open == std::string_view::npos) return std::nullopt;
  Frame f{Field(rest.substr(0, open)), "", 0};
  rest = TrimRight(rest.substr(open + 2));
  // The location, if any: " from LIB" or " at FILE:N", a last word without spaces.
  size_t space = rest.rfind(' ');
  if (space != std::string_view::npos && space > 0) {
    std::string_view word = rest.substr(space + 1);
    std::string_view before = rest.substr(0, space);
    if (before.ends_with(") from") && !word.empty()) {
      f.file = Field(Base(word));
      rest = before.substr(0, before.size() - 5);
    } else if (before.ends_with(") at")) {
      size_t colon = word.rfind(':');
      std::string_view digits = colon == std::string_view::npos ? "" : word.substr(colon + 1);
      if (colon != std::string_view::npos && colon > 0 && !digits.empty() && Digits(digits).size() == digits.size()) {
        f.file = Field(Base(word.substr(0, colon)));
        f.line = ParseInt(digits).value_or(0);
        rest = before.substr(0, before.size() - 3);
      }
    }
  }
  if (!rest.ends_with(')')) return std::nullopt;
  return f;
}

}  // namespace

std::vector<ThreadStack> ParseFaulthandler(std::string_view text, std::string_view main_ident) {
  std::vector<ThreadStack> threads;
  bool skipping = false;  // the hook's own thread, which ran the dump
  std::string_view line;
  for (size_t pos = 0; NextLine(text, pos, line);) {
    bool current = line.starts_with("Current thread ");
    if (line.starts_with("Thread ") || current) {
      ThreadStack t;
      std::string_view name = line.substr(0, line.find(" (most recent call first)"));
      t.name = Field(name);
      std::string_view ident = name.substr(name.rfind(' ') + 1);
      t.main = main_ident.empty() ? current : ident == main_ident;
      skipping = !main_ident.empty() && current && !t.main;
      if (!skipping) threads.push_back(std::move(t));
      continue;
    }
    if (skipping || threads.empty()) continue;
    if (std::optional<Frame> f = FaulthandlerFrame(line)) threads.back().frames.push_back(std::move(*f));
  }
  return threads;
}

std::vector<ThreadStack> ParseGdb(std::string_view text, int pid) {
  std::vector<ThreadStack> threads;
  std::string_view line;
  for (size_t pos = 0; NextLine(text, pos, line);) {
    if (std::optional<int> lwp = GdbThread(line)) {
      threads.push_back(ThreadStack{Field(line.substr(0, line.find(':'))), *lwp == pid, {}});
    } else if (std::optional<Frame> f = GdbFrame(line)) {
      if (threads.empty()) threads.push_back(ThreadStack{"Thread 1", true, {}});
      threads.back().frames.push_back(std::move(*f));
    }
  }
  return threads;
}

std::optional<HookHeader> ParseHookHeader(std::string_view line) {
  constexpr std::string_view kTag = "dlaunch: main thread ", kFd = " fd ";
  if (!line.starts_with(kTag)) return std::nullopt;
  line.remove_prefix(kTag.size());
  size_t fd_at = line.find(kFd);
  if (fd_at == std::string_view::npos || fd_at == 0 || fd_at > 64) return std::nullopt;
  std::optional<int> fd = ParseInt(TrimRight(line.substr(fd_at + kFd.size())));
  if (!fd || *fd < 0) return std::nullopt;
  return HookHeader{std::string(line.substr(0, fd_at)), *fd};
}

}  // namespace dlaunch::launcher
