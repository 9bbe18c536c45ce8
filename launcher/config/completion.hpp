// dlaunch's bash completion, made at build time (launcher/docgen) from the flag
// table and the subcommands, and installed as
// /usr/share/bash-completion/completions/dlaunch.
#pragma once

#include <string>

namespace dlaunch::launcher {

// A bash script that defines _dlaunch and registers it for `dlaunch`. It
// completes flags (both after `dlaunch` and after `dlaunch job SPEC`), the
// subcommands, the values of enumerated flags, file names for --hostfile, key
// and token files and job specs, directories for --log-dir and --dir, host
// names for host flags, and run ids for `status` and `stacks`, which it asks
// the dlaunch being completed for (`dlaunch status`). After `--` or the
// script it leaves the words to bash's default completion. Plain bash 4: it
// needs nothing from the bash-completion package.
std::string BashCompletion();

}  // namespace dlaunch::launcher
