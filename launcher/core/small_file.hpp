// Reading a small file that another process (a worker) wrote, without trusting
// it: opened with O_NOFOLLOW|O_NONBLOCK (a planted symbolic link is refused,
// a FIFO opens at once and fstat refuses it), only a regular file, never
// more read than asked for. Never blocks. The samples files of the straggler
// watch and the workers' progress files are read this way.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "base/status.hpp"

namespace dlaunch::launcher {

// The file's first `limit` bytes (all of it when shorter); nullopt when there
// is no such file; InvalidArgument naming what is there instead ("a symbolic
// link, not a regular file", "a FIFO, not a regular file"), or Io with the
// system's error ("cannot open (...)", "cannot stat (...)", "cannot read (...)").
Result<std::optional<std::string>> ReadFilePrefix(const std::string& path, std::size_t limit);

// The file's bytes, as ReadFilePrefix reads them, and InvalidArgument "more
// than MAX bytes" when it holds more than `max` (one byte past tells).
Result<std::optional<std::string>> ReadSmallFile(const std::string& path, std::size_t max);

}  // namespace dlaunch::launcher
