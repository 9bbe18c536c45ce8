#include "launcher/config/multi_prog.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "launcher/core/small_file.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {
namespace {

constexpr std::string_view kLineForm = "expected RANKS PROGRAM [ARGS...]";

bool Blank(char c) { return c == ' ' || c == '\t'; }

bool AllDigits(std::string_view s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos; }

// Whether envmap's expansion finds "%o" in `word`, reading "%%" as one '%'.
bool UsesOffset(std::string_view word) {
  for (size_t i = 0; i + 1 < word.size(); ++i) {
    if (word[i] != '%') continue;
    if (word[i + 1] == 'o') return true;
    ++i;
  }
  return false;
}

// "ranks 1,3,5" for a message: at most about 64 bytes of the list.
std::string RanksText(const std::vector<int>& ranks) {
  std::string list = RankRanges(ranks);
  if (list.size() > 64) {
    list = list.substr(0, list.rfind(',', 64)) + fmt::format(",... ({} in all)", ranks.size());
  }
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", list);
}

// The text one line at a time, the way the file numbers them.
class Parser {
 public:
  Parser(std::string_view text, std::string_view file_name, int world_size)
      : text_(text), file_(Printable(file_name)), world_size_(world_size) {}

  Result<envmap::ProgramTable> Parse();

 private:
  // The next line without its LF or CRLF, checked for length and bytes; nullopt
  // at the end of the text, and with `status_` set on a bad line.
  std::optional<std::string_view> NextLine(size_t& logical_size);
  // Takes the ranks of `field` for group `group` (line `n`).
  Status TakeRanks(std::string_view field, int group, int n, bool& increasing);
  // The words after the ranks; a backslash at a line's end pulls in the next.
  Result<std::vector<std::string>> Words(std::string_view rest, int n, size_t& logical_size);
  Status Fail(int n, const std::string& what) const {
    return Status::InvalidArgument(fmt::format("multi-prog {}:{}: {}", file_, n, what));
  }

  std::string_view text_;
  size_t pos_ = 0;
  int number_ = 0;  // of the last line taken
  Status status_;
  std::string file_;
  int world_size_;
  std::vector<int> owner_;       // the group of each rank, -1 while none
  std::vector<int> group_line_;  // the line of each group
};

std::optional<std::string_view> Parser::NextLine(size_t& logical_size) {
  if (pos_ >= text_.size()) return std::nullopt;
  size_t end = text_.find('\n', pos_);
  if (end == std::string_view::npos) end = text_.size();
  std::string_view line = text_.substr(pos_, end - pos_);
  pos_ = end + 1;
  ++number_;
  if (line.ends_with('\r')) line.remove_suffix(1);
  logical_size += line.size();
  if (logical_size > kMaxMultiProgLine) {
    status_ = Fail(number_, fmt::format("the line is longer than {} bytes", kMaxMultiProgLine));
    return std::nullopt;
  }
  for (size_t i = 0; i < line.size(); ++i) {
    auto byte = static_cast<unsigned char>(line[i]);
    if ((byte < 0x20 && byte != '\t') || byte == 0x7f) {
      status_ = Fail(number_, fmt::format("byte {} is {}, not text", i + 1, Printable(line.substr(i, 1))));
      return std::nullopt;
    }
  }
  return line;
}

Status Parser::TakeRanks(std::string_view field, int group, int n, bool& increasing) {
  int last = -1;
  for (const std::string& piece : Split(field, ',')) {
    size_t dash = piece.find('-');
    std::string_view lo_text = std::string_view(piece).substr(0, dash);
    std::string_view hi_text = dash == std::string::npos ? lo_text : std::string_view(piece).substr(dash + 1);
    if (!AllDigits(lo_text) || !AllDigits(hi_text))
      return Fail(n, fmt::format("expected RANKS as in '0,2-3' or '*', got '{}'", PrintablePrefix(field, 64)));
    std::optional<int> lo = ParseInt(lo_text), hi = ParseInt(hi_text);
    for (auto [text, value] : {std::pair{lo_text, lo}, std::pair{hi_text, hi}}) {
      if (!value || *value >= world_size_)
        return Fail(
            n, fmt::format("rank {} is out of range: the world size is {}", PrintablePrefix(text, 24), world_size_));
    }
    if (*lo > *hi) return Fail(n, fmt::format("range '{}' runs backwards; write '{}-{}'", piece, *hi, *lo));
    for (int r = *lo; r <= *hi; ++r) {
      int had = owner_[static_cast<size_t>(r)];
      if (had == group) return Fail(n, fmt::format("rank {} is on line {} twice", r, n));
      if (had >= 0)
        return Fail(n, fmt::format("rank {} is on line {} and line {}", r, group_line_[static_cast<size_t>(had)], n));
      owner_[static_cast<size_t>(r)] = group;
      increasing = increasing && r > last;
      last = r;
    }
  }
  return Status::Ok();
}

Result<std::vector<std::string>> Parser::Words(std::string_view rest, int n, size_t& logical_size) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false, quoted = false;
  std::string_view s = rest;
  size_t i = 0;
  for (;;) {
    // A backslash that ends a line continues it on the next one (in quotes too).
    if (i + 1 == s.size() && s[i] == '\\') {
      std::optional<std::string_view> next = NextLine(logical_size);
      if (!status_.ok()) return status_;
      if (next) {
        s = *next;
        i = 0;
        continue;
      }
      ++i;  // the file's last line: the backslash ends it
    }
    if (i >= s.size()) break;
    char c = s[i++];
    if (quoted) {
      if (c == '\'')
        quoted = false;
      else
        word += c == '%' ? std::string_view("%%") : std::string_view(&c, 1);
    } else if (Blank(c)) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c == '\'') {
      quoted = in_word = true;
    } else if (c == '\\') {
      char kept = s[i++];
      word += kept == '%' ? std::string_view("%%") : std::string_view(&kept, 1);
      in_word = true;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quoted) return Fail(n, "a quote (') is not closed");
  if (in_word) words.push_back(std::move(word));
  return words;
}

Result<envmap::ProgramTable> Parser::Parse() {
  if (world_size_ < 1)
    return Status::InvalidArgument(
        fmt::format("multi-prog {}: the world size is {}; it needs at least one rank", file_, world_size_));
  owner_.assign(static_cast<size_t>(world_size_), -1);
  envmap::ProgramTable table;
  int star_line = 0;  // the '*' line, 0 while none
  for (;;) {
    size_t logical_size = 0;
    std::optional<std::string_view> line = NextLine(logical_size);
    if (!status_.ok()) return status_;
    if (!line) break;
    const int n = number_;
    size_t start = line->find_first_not_of(" \t");
    if (start == std::string_view::npos || (*line)[start] == '#') continue;
    std::string_view rest = line->substr(start);
    std::string_view field = rest.substr(0, rest.find_first_of(" \t"));
    rest.remove_prefix(field.size());

    const int group = static_cast<int>(table.groups.size());
    bool star = field == "*", increasing = true;
    if (star && star_line) return Fail(n, fmt::format("a second '*' line (the first is line {})", star_line));
    if (star_line)
      return Fail(n, fmt::format("a line after the '*' line (line {}); '*' takes the ranks no other line names, so "
                                 "it comes last",
                                 star_line));
    group_line_.push_back(n);
    if (star) {
      star_line = n;
    } else if (Status s = TakeRanks(field, group, n, increasing); !s.ok()) {
      return s;
    }

    Result<std::vector<std::string>> argv = Words(rest, n, logical_size);
    if (!argv.ok()) return argv.status();
    if (argv->empty()) return Fail(n, fmt::format("'{}' names no program ({})", PrintablePrefix(field, 64), kLineForm));
    if ((*argv)[0].empty()) return Fail(n, "the program name is empty");
    bool offset = false;
    for (const std::string& w : *argv) offset = offset || UsesOffset(w);
    // srun's %o counts the ranks in the order the line writes them; the table
    // numbers a group's ranks in rank order.
    if (offset && !increasing)
      return Fail(n, fmt::format("ranks '{}' are not in increasing order on a line that uses %o; write them so",
                                 PrintablePrefix(field, 64)));

    envmap::ProgramGroup g;
    g.role = fmt::format("line{}", n);
    g.argv = std::move(*argv);
    g.local_rank_arg_at = g.argv.size();
    g.expand = true;
    g.line = fmt::format("{}:{}", file_, n);
    table.groups.push_back(std::move(g));
  }

  if (table.groups.empty())
    return Status::InvalidArgument(fmt::format("multi-prog {}: no program lines ({})", file_, kLineForm));
  std::vector<int> free_ranks;
  for (size_t r = 0; r < owner_.size(); ++r)
    if (owner_[r] < 0) free_ranks.push_back(static_cast<int>(r));
  if (star_line) {
    const int star_group = static_cast<int>(table.groups.size()) - 1;
    for (int r : free_ranks) owner_[static_cast<size_t>(r)] = star_group;
    // Every rank is named above: srun runs nothing for the '*' line.
    if (free_ranks.empty()) table.groups.pop_back();
  } else if (!free_ranks.empty()) {
    bool one = free_ranks.size() == 1;
    return Status::InvalidArgument(fmt::format("multi-prog {}: {} {} no line; add {} or a '*' line", file_,
                                               RanksText(free_ranks), one ? "has" : "have", one ? "it" : "them"));
  }
  table.group_of = std::move(owner_);
  return table;
}

}  // namespace

Result<envmap::ProgramTable> ParseMultiProg(std::string_view text, std::string_view file_name, int world_size) {
  return Parser(text, file_name, world_size).Parse();
}

Result<std::string> ReadMultiProgText(const std::string& path) {
  auto fail = [&](const std::string& why) {
    return Status::InvalidArgument(fmt::format("multi-prog {}: {}", Printable(path), why));
  };
  // ReadSmallFile refuses a symbolic link, as a file a worker wrote must not be
  // one; this file is the user's own, so read the file a link points to.
  std::unique_ptr<char, decltype(&std::free)> real(realpath(path.c_str(), nullptr), &std::free);
  if (!real) return fail(errno == ENOENT ? "no such file" : fmt::format("cannot open ({})", std::strerror(errno)));
  Result<std::optional<std::string>> text = ReadSmallFile(real.get(), kMaxMultiProgBytes);
  if (!text.ok()) return fail(text.status().message());
  if (!text->has_value()) return fail("no such file");
  return std::move(**text);
}

}  // namespace dlaunch::launcher
