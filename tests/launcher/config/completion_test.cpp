#include "launcher/config/completion.hpp"

#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "launcher/config/cli.hpp"
#include "launcher/config/flag_table.hpp"
#include "launcher/config/subcommands.hpp"

namespace dlaunch::launcher {
namespace {

const std::string& Script() {
  static const std::string script = BashCompletion();
  return script;
}

// The script's line that contains `needle`; "" when none.
std::string LineWith(const std::string& needle) {
  std::istringstream lines(Script());
  for (std::string line; std::getline(lines, line);)
    if (line.find(needle) != std::string::npos) return line;
  return "";
}

// Whether `word` is one of the line's words, taken apart at spaces, quotes,
// '|', '=' and parentheses (`--a | --b) ...`, `sub_flags="--c --d"`).
bool HasWord(std::string line, const std::string& word) {
  for (char& c : line)
    if (c == '"' || c == '|' || c == '=' || c == '(' || c == ')') c = ' ';
  std::istringstream words(line);
  for (std::string w; words >> w;)
    if (w == word) return true;
  return false;
}

TEST_CASE("the completion registers _dlaunch and every marker is filled in", "[completion]") {
  CHECK(Script().find("\ncomplete -F _dlaunch dlaunch\n") != std::string::npos);
  CHECK(Script().find('@') == std::string::npos);
}

TEST_CASE("every flag is offered, and every value flag's value is expected", "[completion]") {
  std::string flags = LineWith("local flags=\"");
  std::string values = LineWith("local value_flags=\" ");
  REQUIRE(!flags.empty());
  REQUIRE(!values.empty());
  for (const Flag& f : Flags()) {
    INFO(f.name);
    std::string name = std::string("--") + f.name;
    CHECK(HasWord(flags, name));
    CHECK(HasWord(values, name) == (f.arity == Arity::kValue));
    if (f.short_name != 0) CHECK(HasWord(flags, std::string("-") + f.short_name));
  }
}

TEST_CASE("enumerated values, files, directories and hosts complete per flag", "[completion]") {
  for (const Flag& f : Flags()) {
    if (f.arity == Arity::kSwitch) continue;
    INFO(f.name);
    std::string name = std::string("--") + f.name;
    std::string arm;
    if (*f.doc.choices != '\0')
      arm = LineWith(std::string("compgen -W '") + f.doc.choices + "'");
    else if (f.doc.kind == ValueKind::kFile)
      arm = LineWith(") _dlaunch_files ;;");
    else if (f.doc.kind == ValueKind::kDirectory)
      arm = LineWith(") _dlaunch_dirs ;;");
    else if (f.doc.kind == ValueKind::kHost)
      arm = LineWith("compgen -A hostname");
    else
      arm = LineWith(") : ;;");
    REQUIRE(!arm.empty());
    CHECK(HasWord(arm, name));
  }
  CHECK(HasWord(LineWith("compgen -W 'report stop'"), "--hang-action"));
  CHECK(HasWord(LineWith(") _dlaunch_dirs ;;"), "--dir"));  // status and stacks
  CHECK(HasWord(LineWith(") _dlaunch_files ;;"), "--hostfile"));
}

TEST_CASE("the subcommands and their own options are offered", "[completion]") {
  std::string names = LineWith("compgen -W \"job ");
  for (const Subcommand& s : Subcommands()) {
    INFO(s.name);
    CHECK(names.find(s.name) != std::string::npos);
    CHECK(!LineWith(std::string("      ") + s.name + ") local sub_flags=\"").empty());
  }
  CHECK(HasWord(LineWith("status) local sub_flags="), "--watch"));
  CHECK(HasWord(LineWith("job) local sub_flags="), "--set"));
  CHECK(HasWord(LineWith("coordinator) local sub_flags="), "--listen"));
}

TEST_CASE("every enumerated value of a flag is one the parser takes", "[completion]") {
  for (const Flag& f : Flags()) {
    std::istringstream choices(f.doc.choices);
    for (std::string choice; choices >> choice;) {
      INFO(f.name << " " << choice);
      auto parsed = ParseCommandLine({std::string("--") + f.name, choice, "t.py"}, {});
      INFO(parsed.status().message());
      CHECK(parsed.ok());
    }
    if (f.arity != Arity::kSwitch) {
      INFO(f.name);
      CHECK(std::string(f.doc.value).find(' ') == std::string::npos);
      CHECK(std::string(f.doc.value) != "V");  // every value is named
    }
  }
}

}  // namespace
}  // namespace dlaunch::launcher
