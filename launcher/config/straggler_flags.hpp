// --straggler-window, --straggler-action, --straggler-ignore,
// --straggler-threshold, --straggler-native, --straggler-file: naming the rank
// that holds the others back (launcher/straggler/detector.hpp says how). The
// flag table's setters only validate, with these functions; StragglerFlagsFor
// reads the flags typed into the one struct the workers' plan carries.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/defaults.hpp"
#include "base/status.hpp"

namespace dlaunch::launcher {

struct Options;

struct StragglerFlags {
  // How often the ranks are compared; 0: never (no sampler starts).
  std::chrono::milliseconds window{base::kDefaultStragglerWindow};  // Default: 60s
  bool stop = false;                                    // --straggler-action stop: end the job (base::kExitStraggler)
  std::vector<std::string> ignore;                      // frames the user knows of
  double threshold = base::kDefaultStragglerThreshold;  // the others' loss that names a rank
  bool native = false;                                  // sample a rank that writes no samples from /proc
  std::string file;                                     // where stop writes the slow node's host name; "" none

  bool enabled() const { return window.count() > 0; }
};

// The setters' checks: InvalidArgument with one line naming the flag, e.g.
// "--straggler-window: expected seconds from 1 to 2592000 (0: off), got 'x'".
Status CheckStragglerWindow(const std::string& value);
Status CheckStragglerAction(const std::string& value);
Status CheckStragglerThreshold(const std::string& value);
Status CheckStragglerIgnore(const std::string& value);
Status CheckStragglerFile(const std::string& value);

// The flags as typed (the last of each wins; --straggler-ignore adds up).
// Fails when a flag that only shapes detection comes with --straggler-window 0.
Result<StragglerFlags> StragglerFlagsFor(const Options& typed);

// --explain's line: "straggler: ranks compared every 60s (--straggler-window);
// named at 10% of the others' time (report)"; "straggler: off" at window 0;
// "" with every default.
std::string ExplainStraggler(const StragglerFlags& flags);

}  // namespace dlaunch::launcher
