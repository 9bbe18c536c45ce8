// Each worker's progress file (DLAUNCH_PROGRESS_FILE): a path of its own in
// dlaunch's private directory, where the script writes how far it got, one
// line of Python in its training loop:
//   open(os.environ["DLAUNCH_PROGRESS_FILE"], "w").write(str(step))
// A rank makes progress when it writes a larger number. Its output is not
// progress: a script that crashes at step 0 prints the same lines every run.
//
// The files are read on demand, never polled: at a failure (the supervisor's
// restart decision, rendezvous/restart_policy.hpp) and at each heartbeat of a
// rendezvous node. A read never blocks and never grows memory, whatever a
// worker left at the path: it opens with O_NOFOLLOW|O_NONBLOCK, accepts only a
// regular file (a symbolic link, a FIFO or a directory gets a warning) and
// reads at most kProgressFileBytes + 1 bytes.
//
// Every call happens on the event loop's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "envmap/layout.hpp"
#include "envmap/worker_env.hpp"

namespace dlaunch::launcher {

using envmap::kProgressFileVar;  // envmap/worker_env.hpp
// The most a progress file may hold: a 19-digit number with room for blanks.
inline constexpr std::size_t kProgressFileBytes = 64;

// What a progress file's text says.
struct ProgressText {
  enum class Kind {
    kEmpty,   // nothing but blanks: a write under way, or no write yet
    kNumber,  // a decimal number from 0 to INT64_MAX, blanks around it allowed
    kJunk,    // anything else: a sign, letters, several numbers, over 64 bits
  };
  Kind kind = Kind::kEmpty;
  std::int64_t value = -1;  // kNumber only
};
// `text` as a progress file's content (at most kProgressFileBytes; longer is junk).
ProgressText ParseProgress(std::string_view text);

// What reading one progress file found.
struct ProgressRead {
  enum class Kind {
    kNothing,  // no file, an empty one, or only blanks: no value, no warning
    kNumber,   // `value`
    kRefused,  // `why`: one line for the user, the path and what was there, quoted and cut
  };
  Kind kind = Kind::kNothing;
  std::int64_t value = -1;
  std::string why;
};
// Reads the progress file at `path` as described above. Never blocks.
ProgressRead ReadProgressFile(const std::string& path);

// The progress files of one node's local ranks.
class ProgressFiles {
 public:
  // `dir`: dlaunch's private directory for the job (0700, made for it, removed
  // after it); `nproc`: the local ranks; `warn`: says one line to the user (the
  // console), at most once per rank and generation.
  ProgressFiles(std::string dir, int nproc, std::function<void(const std::string&)> warn);

  // Local rank `local_rank` of generation `generation` (the job's restart
  // count) starts: clears its path (a fresh path for each generation, so an
  // old generation's value never counts again), forgets its value and removes
  // the file of its previous generation. The file is not made: the worker
  // creates it when it first writes, and a missing file reads as nothing
  // written. Returns the path for DLAUNCH_PROGRESS_FILE, or "" (said once
  // through `warn`) when what is at the path cannot be removed (a directory a
  // worker made there): that worker then runs without the variable.
  std::string Prepare(int generation, int local_rank);

  // Reads every prepared file. Per local rank: the largest number it has
  // written in its current generation, or -1 when none (yet). Junk, a negative
  // number, one over 64 bits or anything but a regular file is ignored, with
  // one warning per rank and generation.
  std::vector<std::int64_t> Read();

  // The values as of the last Read(), without reading.
  const std::vector<std::int64_t>& values() const { return values_; }

  // The path of `local_rank`'s file in `generation`.
  std::string PathOf(int generation, int local_rank) const;

 private:
  struct Rank {
    std::string path;  // empty: not prepared (or it could not be cleared)
    int generation = -1;
    bool warned = false;
  };

  std::string dir_;
  std::function<void(const std::string&)> warn_;
  std::vector<Rank> ranks_;
  std::vector<std::int64_t> values_;
};

// What a rendezvous node sends in a heartbeat: files.Read(), each local rank
// that wrote a number as (its global rank in `layout`, this node's slots, the
// value). Ranks with nothing yet are left out.
std::vector<std::pair<int, std::int64_t>> ProgressByRank(ProgressFiles& files, const envmap::JobLayout& layout);

}  // namespace dlaunch::launcher
