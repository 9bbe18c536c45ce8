// Worker output: splitting a byte stream into whole lines and tagging each one.
//
// A LineTagger belongs to one stream of one worker. It never emits part of a
// line, so two workers' lines cannot interleave mid-line however the reads fall;
// a line longer than the cap is cut there so that a worker without newlines
// cannot grow memory without bound.
//
// Tagged output (a non-empty prefix) is made of whole lines: a cut piece is
// ended with a newline and the rest continues on a new tagged line, and a final
// line without a newline gets one. Untagged output (an empty prefix) is the
// worker's bytes exactly: a cut adds nothing (another worker's line may come
// between the pieces) and a final partial line is passed on as it is.
#pragma once

#include <chrono>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace dlaunch::launcher {

// Default: 1 MiB per line before it is cut.
inline constexpr size_t kMaxLineBytes = size_t{1} << 20;

class LineTagger {
 public:
  explicit LineTagger(size_t max_line = kMaxLineBytes) : max_line_(max_line) {}

  // Appends every line completed by `data` to `out`, each behind `prefix`, and
  // keeps the unfinished rest for the next call. Pass the same prefix, empty or
  // not, for the whole stream.
  void Feed(std::string_view data, std::string_view prefix, std::string& out);
  // Appends the unfinished rest, if any: a tagged one as a final line with a
  // newline added, an untagged one as it is.
  void Finish(std::string_view prefix, std::string& out);
  bool has_partial() const { return !partial_.empty(); }

 private:
  size_t max_line_;
  std::string partial_;
};

// The fields a tag format may use.
struct TagFields {
  int rank = 0;
  int local_rank = 0;
  int node_rank = 0;
  std::string role;
  std::string stream;  // "stdout" or "stderr"
  std::string host;    // the node's host name
};

// Renders `format` ("[{rank}]: ", "{host}:{node_rank}.{local_rank}|{time} ") for one
// worker stream. {time} is the local time given. Returns InvalidArgument naming
// the format when it does not parse, e.g. with an unknown field.
Result<std::string> RenderTag(const std::string& format, const TagFields& fields, std::time_t now);

// Writes all of `data` to `fd`, waiting out EAGAIN and EINTR; gives up quietly
// when the other end is gone (a closed console has nowhere to show it).
void WriteAll(int fd, std::string_view data);
// Reads up to `n` bytes that are already in the pipe `fd` into `p`, retrying
// EINTR; stops at end of file, EAGAIN or an error. Returns the bytes read.
size_t ReadPresent(int fd, char* p, size_t n);

// Keeps the last `max_bytes` of a stream, for the failure summary.
class TailBuffer {
 public:
  explicit TailBuffer(size_t max_bytes = 4096) : max_(max_bytes) {}
  void Append(std::string_view data);
  // Up to `n` last lines, oldest first, without their newlines.
  std::vector<std::string> LastLines(size_t n) const;

 private:
  size_t max_;
  std::string buf_;
};

// The last line of one stream and when bytes last came, for `dlaunch status`.
// Bounded: whatever a worker writes, it keeps at most 2 x max_bytes.
class LastLine {
 public:
  explicit LastLine(size_t max_bytes = 512) : max_(max_bytes) {}
  void Append(std::string_view data, std::chrono::steady_clock::time_point now);
  // The line being written when it has text (a progress bar without a newline),
  // else the last complete one; of it, what a terminal would show after its last
  // '\r', cut at max_bytes. Raw bytes: the caller makes them safe to show.
  std::string line() const;
  // When the last bytes came; nullopt before any.
  std::optional<std::chrono::steady_clock::time_point> at() const { return at_; }

 private:
  size_t max_;
  std::string done_;     // the last complete line (its last 2 x max_ bytes)
  std::string partial_;  // the line being written (its last 2 x max_ bytes)
  std::optional<std::chrono::steady_clock::time_point> at_;
};

}  // namespace dlaunch::launcher
