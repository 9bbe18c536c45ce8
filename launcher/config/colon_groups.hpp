// mpirun's colon syntax: `dlaunch -np 1 --role a -- a.py : -np 3 --role b -- b.py`
// runs two groups of workers, each with its own flags and command.
//
// A worker's own arguments may hold a lone ":" (`sh -c 'x' :`), so a ":"
// separates groups only when a group flag or "--" comes right after it. An
// argument of backslashes and a ":" ("\:", "\\:") stands for itself with one
// backslash less, so "\:" passes a literal ":" in that position.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "envmap/programs.hpp"
#include "launcher/config/cli.hpp"

namespace dlaunch::launcher {

// Whether `arg` is a flag a group may give for itself (its count, role,
// command, variables, dialects, hosts, GPUs), in any spelling
// ("--nproc-per-node=2", "-np", "-x").
bool IsGroupFlag(std::string_view arg);

// The long names (as Options::typed records them) of the flags a group may
// give; every other flag belongs to the whole job and goes before the first ":".
bool IsGroupFlagName(std::string_view name);

// Splits argv (without argv[0]) into groups at each separating ":", and takes
// one backslash off each escaped ":" of a worker's command. One segment when
// there is no separator. A segment may come out empty (a ":" at the start, or
// two in a row): the caller names that group.
std::vector<std::vector<std::string>> SplitGroups(const std::vector<std::string>& args);

struct JobLine {
  Options options;               // the job's flags, for Decide
  envmap::ProgramPlan programs;  // empty: one program, as before
};

// Parses argv (without argv[0]) as ParseCommandLine does, group by group. Fails
// with one line naming the group: "group 2: no command after ':'",
// "group 2 (rollout): --max-restarts applies to the whole job; give it before the first ':'".
Result<JobLine> ParseJobLine(const std::vector<std::string>& args, const envmap::EnvMap& env);

}  // namespace dlaunch::launcher
