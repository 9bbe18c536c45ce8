// srun's --multi-prog file: which ranks run which program. Each line that is
// not blank or a comment is one group of the job's table (envmap/programs.hpp):
//
//   # RANKS  PROGRAM   ARGS...
//   0        server.py --port 29600
//   1-3,5    worker.py --id %o
//   *        logger.py task-%t
//
// Read as srun reads it (srun(1), MULTIPLE PROGRAM CONFIGURATION):
//   - fields are separated by spaces and tabs; a line ends at LF or CRLF;
//   - RANKS is a comma list of ranks and ranges, the smaller number first
//     ("0,2-3"), or "*": every rank no line above names, on the last line;
//   - a line whose first non-blank byte is '#' is a comment; a '#' later in a
//     line is an argument like any other;
//   - '...' keeps what it encloses as it is (spaces, '\', "%t"); outside quotes
//     a backslash keeps the next byte as it is, and a backslash that ends a
//     line continues it on the next one;
//   - "%t" in an argument is the rank, "%o" its place among its line's ranks.
// The arguments stay as written, with ProgramGroup::expand set: envmap expands
// them. A '%' that was quoted or escaped is kept as "%%", which that expansion
// turns back into one '%'. Pure but for ReadMultiProgText.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.hpp"
#include "envmap/programs.hpp"

namespace dlaunch::launcher {

// The largest file read, and the longest line (continued lines together).
inline constexpr std::size_t kMaxMultiProgBytes = 1 << 20;
inline constexpr std::size_t kMaxMultiProgLine = 64 << 10;

// Parses srun --multi-prog text: one group per line, in file order; group
// "line<N>" (role and ROLE_NAME) holds line N's ranks and runs its argv as
// given (local_rank_arg_at = argv.size()). A '*' line that finds every rank
// named above adds no group, as srun ignores it. `file_name` is for messages,
// `world_size` (>= 1) the job's ranks. Fails with one InvalidArgument naming
// the place: "multi-prog FILE:N: rank 2 is on line 1 and line 3", "multi-prog
// FILE: rank 5 has no line; add it or a '*' line".
Result<envmap::ProgramTable> ParseMultiProg(std::string_view text, std::string_view file_name, int world_size);

// Reads FILE (a regular file of at most kMaxMultiProgBytes; a directory, a
// FIFO or a device is refused without blocking; a symbolic link is followed),
// for ParseMultiProg once the world size is known (a rendezvous learns it
// late). Fails with InvalidArgument "multi-prog FILE: ...".
Result<std::string> ReadMultiProgText(const std::string& path);

}  // namespace dlaunch::launcher
