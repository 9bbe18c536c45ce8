// Reading a small file that another process (a worker) wrote, without trusting
// it: opened with O_NOFOLLOW|O_NONBLOCK (a planted symbolic link is refused,
// a FIFO opens at once and fstat refuses it), only a regular file, at most
// `max` bytes read (one more tells a file that is too long). Never blocks,
// never allocates more than `max` + 1 bytes.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "base/status.hpp"

namespace dlaunch::launcher {

// The file's bytes; nullopt when there is no such file; an error naming what
// is there instead ("a symbolic link, not a regular file", "a FIFO, not a
// regular file", "more than 65536 bytes") or the system's error.
Result<std::optional<std::string>> ReadSmallFile(const std::string& path, std::size_t max);

}  // namespace dlaunch::launcher
