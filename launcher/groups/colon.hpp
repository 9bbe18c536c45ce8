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

namespace dlaunch::launcher {

// Whether `arg` is a flag a group may give for itself (its count, role,
// command, variables, dialects, hosts, GPUs, restarts), in any spelling
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

}  // namespace dlaunch::launcher
