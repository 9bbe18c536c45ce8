// libFuzzer target: the Slurm hostlist expander and task-count parser
// (envmap/detect.hpp ExpandHostlist, TasksOnNode).
//
// Input: the hostlist text (as in SLURM_JOB_NODELIST, or SLURM_TASKS_PER_NODE for
// TasksOnNode). Neither may hang, overflow or allocate without bound; a list that
// expands must give non-empty names.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "envmap/detect.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto hosts = dlaunch::envmap::ExpandHostlist(text);
  if (hosts.ok()) {
    for (const std::string& h : *hosts) FUZZ_CHECK(!h.empty(), "ExpandHostlist returned an empty name");
  }
  for (int node : {0, 1, 2, 7, 1000, 2147483647}) {
    auto tasks = dlaunch::envmap::TasksOnNode(text, node);
    (void)tasks;
  }
  return 0;
}
