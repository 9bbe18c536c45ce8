#include "launcher/config/refused_flags.hpp"

#include <fmt/format.h>

namespace dlaunch::launcher {
namespace {

struct Refusal {
  std::string_view name;
  std::string_view instead;
};

// What torch 2.x does with each (torch/distributed/run.py, elastic/multiprocessing
// and torch/numa/binding.py), and why dlaunch points elsewhere:
//   --duplicate-std{out,err}-filters copy the tee'd ranks' lines that contain
//     any of the strings into filtered_std{out,err}.log of the attempt's log
//     directory; dlaunch's --tee files hold every line, ready for grep.
//   --numa-binding binds each worker to the CPUs of the NUMA node, socket or L3
//     cache of GPU LOCAL_RANK; dlaunch binds by NUMA node in local-rank order.
//   --event-log-handler names a handler registered in torch's Python process;
//     dlaunch writes its events to a file.
constexpr Refusal kRefusals[] = {
    {"duplicate-stdout-filters", "use --tee 1 --log-dir DIR and grep DIR/RUN_ID/attempt_N/*/stdout.log"},
    {"duplicate-stderr-filters", "use --tee 2 --log-dir DIR and grep DIR/RUN_ID/attempt_N/*/stderr.log"},
    {"numa-binding",
     "use --bind-to numa (CPUs of NUMA node LOCAL_RANK % nodes), or numactl --cpunodebind=N --membind=N before the "
     "command"},
    {"event-log-handler", "use --events FILE (the job's events, one JSON object per line)"},
};

}  // namespace

std::optional<std::string> RefusedFlag(std::string_view name) {
  for (const Refusal& r : kRefusals)
    if (r.name == name) return fmt::format("--{}: not supported (a torchrun 2.x flag); {}", r.name, r.instead);
  return std::nullopt;
}

std::vector<std::string_view> RefusedFlagNames() {
  std::vector<std::string_view> names;
  for (const Refusal& r : kRefusals) names.push_back(r.name);
  return names;
}

}  // namespace dlaunch::launcher
