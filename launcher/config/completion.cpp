// The bash completion script. The shell logic is written once below; the
// flags, their values and the subcommands are filled in from the tables.
#include "launcher/config/completion.hpp"

#include <algorithm>
#include <map>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "launcher/config/flag_table.hpp"
#include "launcher/config/subcommands.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {
namespace {

// Bash's own completion of a value of each kind (cur: the word being completed).
constexpr const char* kCompleteFile = "_dlaunch_files";
constexpr const char* kCompleteDirectory = "_dlaunch_dirs";
constexpr const char* kCompleteHost = "COMPREPLY=($(compgen -A hostname -- \"$cur\"))";

// The script, with @NAME@ markers for what the tables supply. Words are
// matched as " WORD " inside space-padded lists, so no pattern in it comes
// from the command line being completed.
constexpr const char* kScript = R"SH(# bash completion for dlaunch. Generated at build time from dlaunch's flag
# table (launcher/config/completion.cpp): edit that, not this file.

_dlaunch_files() {
  compopt -o filenames 2>/dev/null
  COMPREPLY=($(compgen -f -- "$cur"))
}

_dlaunch_dirs() {
  compopt -o filenames 2>/dev/null
  COMPREPLY=($(compgen -d -- "$cur"))
}

# The run ids of this user's jobs here, as `dlaunch status` lists them.
_dlaunch_run_ids() {
  local bin=${COMP_WORDS[0]} dir=$1
  [[ -x $bin ]] || bin=dlaunch
  COMPREPLY=($(compgen -W "$(COLUMNS= "$bin" status ${dir:+--dir "$dir"} 2>/dev/null | awk 'NR > 1 {print $1}')" -- "$cur"))
}

# Completes the value of option $1; false when $1 takes no value.
_dlaunch_value() {
  case $1 in
@VALUE_CASES@
    *) return 1 ;;
  esac
  return 0
}

_dlaunch() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} flag="" sub="" w i=1 eq=0
  local value_flags=" @VALUE_FLAGS@ "
  local flags="@FLAGS@"
  COMPREPLY=()
  # Bash splits --flag=value at '=' into three words.
  if [[ $cur == = ]]; then flag=$prev cur="" eq=1; elif [[ $prev == = ]]; then flag=${COMP_WORDS[COMP_CWORD-2]} eq=1; else flag=$prev; fi
  [[ $flag == --* ]] && flag=${flag//_/-}
  if ((COMP_CWORD > 1)) && [[ " @SUBCOMMANDS@ " == *" ${COMP_WORDS[1]} "* ]]; then
    sub=${COMP_WORDS[1]} i=2
    case $sub in
@SUB_OPTIONS@
    esac
  fi
  # What is before the word: flags and their values, then (past `--` or a
  # positional) the command, which is bash's to complete.
  local positional=0 dashdash=0 dir=""
  while ((i < COMP_CWORD)); do
    w=${COMP_WORDS[i]}
    [[ $w == --* ]] && w=${w//_/-}
    if [[ $w == -- ]]; then dashdash=1; break; fi
    [[ $w == --dir ]] && dir=${COMP_WORDS[i+1]}
    if [[ $w == -* && ${COMP_WORDS[i+1]} == = ]]; then ((i += 3)); continue; fi
    if [[ $w == -* && $value_flags == *" $w "* ]]; then ((i += 2)); continue; fi
    if [[ $w != -* ]]; then
      positional=$((positional + 1))
      [[ -z $sub ]] && break
    fi
    ((i++))
  done
  if ((dashdash)) || [[ -z $sub && $positional -gt 0 ]] || [[ $sub == job && $positional -gt 1 ]]; then
    # The command: its first word a program, the rest bash's default.
    if ((dashdash && i + 1 == COMP_CWORD)); then COMPREPLY=($(compgen -c -- "$cur")); return; fi
    compopt -o default 2>/dev/null
    return
  fi
  if ((eq)) || [[ $value_flags == *" $flag "* ]]; then
    _dlaunch_value "$flag"
    return
  fi
  case $sub in
    status | stacks)
      if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$sub_flags" -- "$cur")); else _dlaunch_run_ids "$dir"; fi
      return ;;
    coordinator)
      COMPREPLY=($(compgen -W "$sub_flags" -- "$cur"))
      return ;;
    job)
      if ((positional == 0)) && [[ $cur != -* ]]; then
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -d -- "$cur") $(compgen -f -X '!*.y*ml' -- "$cur"))
        return
      fi
      COMPREPLY=($(compgen -W "$sub_flags $flags" -- "$cur"))
      return ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  elif ((COMP_CWORD == 1)); then
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -W "@SUBCOMMANDS@" -- "$cur") $(compgen -f -- "$cur"))
  else
    _dlaunch_files
  fi
}

complete -F _dlaunch dlaunch
)SH";

std::string Replace(std::string text, std::string_view marker, const std::string& with) {
  size_t at = text.find(marker);
  while (at != std::string::npos) {
    text.replace(at, marker.size(), with);
    at = text.find(marker, at + with.size());
  }
  return text;
}

std::string Action(ValueKind kind, std::string_view choices) {
  if (!choices.empty()) return fmt::format("COMPREPLY=($(compgen -W '{}' -- \"$cur\"))", choices);
  switch (kind) {
    case ValueKind::kFile:
      return kCompleteFile;
    case ValueKind::kDirectory:
      return kCompleteDirectory;
    case ValueKind::kHost:
      return kCompleteHost;
    case ValueKind::kText:
      break;
  }
  return ":";  // a value, but nothing to offer
}

// One `case` arm per value flag (long and short spelling) and per value that a
// subcommand's own option takes (--dir DIR, --listen ADDR:PORT).
std::string ValueCases() {
  std::map<std::string, std::string> arms;  // action -> "--a | -b"
  auto add = [&](const std::string& action, const std::string& word) {
    std::string& line = arms[action];
    line += (line.empty() ? "" : " | ") + word;
  };
  for (const Flag& f : Flags()) {
    if (f.arity == Arity::kSwitch) continue;
    std::string action = Action(f.doc.kind, f.doc.choices);
    add(action, fmt::format("--{}", f.name));
    if (f.short_name != 0) add(action, fmt::format("-{}", f.short_name));
  }
  for (const Subcommand& s : Subcommands()) {
    for (const std::string& option : Split(s.options, ' ')) {
      size_t eq = option.find('=');
      if (eq == std::string::npos) continue;
      std::string word = option.substr(0, eq), value = option.substr(eq + 1);
      bool main_flag = word.starts_with("--") ? FindFlag(word.substr(2)) != nullptr : FindShort(word.at(1)) != nullptr;
      if (main_flag) continue;  // its arm is the flag table's
      std::string action = value == "DIR" ? kCompleteDirectory : value == "FILE" ? kCompleteFile : ":";
      if (arms[action].find(word) == std::string::npos) add(action, word);
    }
  }
  std::string out;
  for (const auto& [action, words] : arms) out += fmt::format("    {}) {} ;;\n", words, action);
  out.pop_back();
  return out;
}

std::string ValueFlags() {
  std::vector<std::string> words;
  for (const Flag& f : Flags()) {
    if (f.arity != Arity::kValue) continue;
    words.push_back(fmt::format("--{}", f.name));
    if (f.short_name != 0) words.push_back(fmt::format("-{}", f.short_name));
  }
  for (const Subcommand& s : Subcommands()) {
    for (const std::string& option : Split(s.options, ' ')) {
      std::string word = option.substr(0, option.find('='));
      if (word.size() < option.size() && std::find(words.begin(), words.end(), word) == words.end())
        words.push_back(word);
    }
  }
  return fmt::format("{}", fmt::join(words, " "));
}

std::string FlagWords() {
  std::vector<std::string> words;
  for (const Flag& f : Flags()) {
    words.push_back(fmt::format("--{}", f.name));
    if (f.short_name != 0) words.push_back(fmt::format("-{}", f.short_name));
  }
  return fmt::format("{}", fmt::join(words, " "));
}

// Each subcommand's own options, as $sub_flags.
std::string SubOptions() {
  std::string out;
  for (const Subcommand& s : Subcommands()) {
    std::vector<std::string> words;
    for (const std::string& option : Split(s.options, ' ')) words.emplace_back(option.substr(0, option.find('=')));
    out += fmt::format("      {}) local sub_flags=\"{}\" ;;\n", s.name, fmt::join(words, " "));
  }
  out.pop_back();
  return out;
}

std::string SubcommandNames() {
  std::vector<std::string> names;
  for (const Subcommand& s : Subcommands()) names.emplace_back(s.name);
  return fmt::format("{}", fmt::join(names, " "));
}

}  // namespace

std::string BashCompletion() {
  std::string out = kScript;
  out = Replace(out, "@VALUE_CASES@", ValueCases());
  out = Replace(out, "@VALUE_FLAGS@", ValueFlags());
  out = Replace(out, "@FLAGS@", FlagWords());
  out = Replace(out, "@SUB_OPTIONS@", SubOptions());
  return Replace(out, "@SUBCOMMANDS@", SubcommandNames());
}

}  // namespace dlaunch::launcher
