// The standard descriptors 0, 1 and 2: made sure of at start, and set up in a
// child between fork and exec.
//
// A program started with one of them closed (by a supervisor, a daemonising
// wrapper, a CI runner: `dlaunch ... <&-`) hands that number to the first file
// it opens. A pipe that lands on 0 is then "stdin" to every child that
// inherits stdin, and dup2(fd, fd) onto it keeps its close-on-exec flag, so the
// child starts with it closed.
#pragma once

#include "base/status.hpp"

namespace dlaunch::launcher {

// What daemons do first: opens `null_path` (read and write) on each of 0, 1
// and 2 that is closed, lowest first, so that each lands on its own number.
// Call it at the top of main(), before anything opens a file. Io
// "/dev/null: cannot open (No such file or directory)" when it cannot be
// opened; the descriptors below the failing one are open by then.
Status OpenClosedStandardFds(const char* null_path = "/dev/null");

// Makes from[i] the calling process's descriptor i, for i = 0, 1, 2 (-1:
// leave it as it is), inheritable across exec. For a child between fork (or
// vfork) and exec: async-signal-safe, and writes nothing but its own stack.
// Unlike one dup2 per descriptor, a source that already is its target loses its
// close-on-exec flag (dup2(fd, fd) changes nothing, and exec would close it),
// and a source among 0-2 is copied before another dup2 could overwrite it.
void SetStandardFds(const int (&from)[3]);

}  // namespace dlaunch::launcher
