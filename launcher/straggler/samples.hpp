// Where a rank's main thread spends its time, as sampled while the job runs:
// the unit that straggler detection (detector.hpp) compares across ranks.
//
// A Python worker samples itself. The stack hook (launcher/stacks/stack_hook.py)
// starts a thread when DLAUNCH_SAMPLE_PERIOD_MS and DLAUNCH_SAMPLE_FLUSH_MS are
// set (and takes both out of os.environ, so that the worker's own children do
// not sample). Every period it looks at the main thread's innermost frame, and
// every flush it writes what it has counted since it started, cumulative, to
// DLAUNCH_STACKS_DIR/<pid>.samples (a temporary file renamed over it: a reader
// sees a whole file or the last one). dlaunch reads the file when it wants a
// window (the difference of two reads), so there is no per-sample traffic.
// The file, at most kMaxSamplesFile bytes of lines:
//
//   dlaunch-samples 1
//   period_ms 100
//   ticks 1234                 sampling periods since the sampler started
//   late 3                     of them not attributed: the sampler woke late
//   late_ms 950                how late, in all, and at most once
//   max_late_ms 420
//   cpu_us 52000               the sampler thread's own CPU time (time.thread_time)
//   wall_ms 123400             since the sampler started
//   user 120 data.py:17 load_batch
//   top 120 data.py:17 load_batch
//   top 300 torch/autograd/__init__.py:197 backward
//
// A "user" line counts the ticks whose innermost frame in the user's code (not
// the standard library, site- or dist-packages, nor "<frozen ...>") is KEY;
// "top" the innermost frame overall. KEY is "PATH:LINE FUNCTION": PATH is a
// user file's base name, or a library file's path below its site-packages (or
// standard library) directory. A sample woken more than half a period late is
// not attributed to any frame (the frame it sees is where the main thread is
// now, not where it held the GIL): it counts in `late`, as many ticks as it
// missed. So ticks = the attributed ticks + late, in each of user and top
// (where the main thread had no user frame, the sample counts in user as
// "(no user frame)").
//
// A native worker (--straggler-native) is sampled by dlaunch from
// /proc/PID/task/*/stat into the same counts: top keys "running", "sleeping in
// WCHAN" or "disk-wait in WCHAN", no user keys.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/status.hpp"

namespace dlaunch::launcher {

inline constexpr std::size_t kMaxSamplesFile = 64 * 1024;
// Keys per histogram in a file or on the wire; the sampler counts the rest as kOtherFrames.
inline constexpr std::size_t kMaxSampleKeys = 64;
inline constexpr std::size_t kMaxSampleKey = 256;  // bytes in one key
// The largest count a file or a window item may hold (a field, or a key's
// count once its lines are summed): 2^50 ticks are ages at any period, and
// kMaxSampleKeys of them sum without overflow.
inline constexpr std::int64_t kMaxSampleCount = std::int64_t{1} << 50;
inline constexpr std::string_view kOtherFrames = "(other frames)";
inline constexpr std::string_view kNoUserFrame = "(no user frame)";
// The pseudo-frame a rank's late ticks are shown as: time the main thread held
// the GIL in C code, which a Python-level sampler cannot place.
inline constexpr std::string_view kLateFrame = "(holding the GIL)";
// A native rank's key while all its threads sleep: "sleeping in WCHAN".
inline constexpr std::string_view kSleepingIn = "sleeping in ";

// 10 Hz: a 60 s window holds 600 samples a rank, at a cost well under 1% of
// a core (bench/results.md).
inline constexpr std::chrono::milliseconds kSamplePeriod{100};

// How often a sampler writes its file for comparisons every `window`: a
// quarter of a window, from 0.5 s to 5 s, so a window's read misses at most
// that much of either end. (launcher/stacks/python_hook.hpp's AddSampler puts
// both into a worker's environment.)
std::chrono::milliseconds SampleFlush(std::chrono::milliseconds window);

// Ticks by frame key.
using FrameCounts = std::map<std::string, std::int64_t, std::less<>>;

struct RankSamples {
  std::int64_t period_ms = 0;
  std::int64_t ticks = 0;
  std::int64_t late = 0;
  std::int64_t late_ms = 0;
  std::int64_t max_late_ms = 0;
  std::int64_t cpu_us = 0;
  std::int64_t wall_ms = 0;
  FrameCounts user;
  FrameCounts top;

  bool operator==(const RankSamples&) const = default;
};

// A samples file's text. Never throws and never allocates past the bounds
// above. InvalidArgument naming the first bad line ("line 3: expected 'ticks
// N', got ...") for anything else: a wrong header, a negative or non-decimal
// count or one over kMaxSampleCount (a key's lines summed), a key over
// kMaxSampleKey or with a control character, more than
// kMaxSampleKeys keys of a kind, text over kMaxSamplesFile.
Result<RankSamples> ParseSamples(std::string_view text);

// What happened between two reads of one sampler's file: each count of `now`
// less the one of `before`. A sampler that started again (a count went down,
// another period) gives `now` whole. max_late_ms is `now`'s.
RankSamples SamplesSince(const RankSamples& now, const RankSamples& before);

}  // namespace dlaunch::launcher
