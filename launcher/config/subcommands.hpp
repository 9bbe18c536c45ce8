// dlaunch's subcommands (`dlaunch job`, `status`, `stacks`, `coordinator`): the
// one list that --help, each subcommand's own help, the man page and the bash
// completion read, so that a new one shows everywhere at once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dlaunch::launcher {

struct Subcommand {
  const char* name;
  const char* args;     // what follows the name in its synopsis
  const char* summary;  // one line, for --help
  // Its own options, space-separated; "--dir=DIR" takes a value, named after the
  // first '=' (DIR and FILE complete as such). `job` also takes every dlaunch flag.
  const char* options;
  const char* example;  // one command line, ending its help
};

// Every subcommand, in --help's order.
const std::vector<Subcommand>& Subcommands();
// The subcommand called `name`; null when none.
const Subcommand* FindSubcommand(std::string_view name);
// "example: dlaunch ...\n", the last line of `name`'s help ("" for an unknown name).
std::string ExampleLine(std::string_view name);

}  // namespace dlaunch::launcher
