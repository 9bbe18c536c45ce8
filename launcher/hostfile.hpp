// The job's node list, as the launchers users come from write it: an Open MPI
// hostfile (`host slots=N max_slots=M`), a DeepSpeed hostfile (`host slots=N`,
// `#` comments), `host:N` lines, mpirun's `-H n1:4,n2:4`, and DeepSpeed's
// `--include` / `--exclude` filters. Pure: the file's text comes in as a string.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "envmap/status.hpp"

namespace dlaunch::launcher {

struct HostEntry {
  std::string host;
  std::optional<int> slots;  // nullopt: the line named no count (take --nproc-per-node)
  // Slot ids left after --include/--exclude picked some (DeepSpeed's GPU ids, which
  // become CUDA_VISIBLE_DEVICES); empty: every slot.
  std::vector<int> only_slots;
};

// Parses a hostfile's text; `name` is the file's path, for messages. A host may
// appear once. Fails with InvalidArgument "hostfile NAME:LINE: expected 'slots=N',
// got 'slot=4'" and the like, or "hostfile NAME: no hosts".
Result<std::vector<HostEntry>> ParseHostfile(std::string_view text, const std::string& name);

// Parses mpirun's -H list: "n1:4,n2:4" or "n1,n2". Fails naming `flag` and the entry.
Result<std::vector<HostEntry>> ParseHostList(std::string_view list, const std::string& flag);

// Applies DeepSpeed's filters, at most one of them non-empty. `include`: only the
// hosts named ("n1@n2:0,2": all of n1, slots 0 and 2 of n2). `exclude`: every host
// but those named, or without the slots named. Slots need a known count. Fails
// naming the flag and the host or slot that is not in the list, or when nothing
// is left.
Result<std::vector<HostEntry>> FilterHosts(std::vector<HostEntry> hosts, const std::string& include,
                                           const std::string& exclude);

// Workers on that node: the slots picked by a filter, else --nproc-per-node when
// given, else the slots the list names, else `nproc`.
int WorkersOn(const HostEntry& entry, bool nproc_given, int nproc);

}  // namespace dlaunch::launcher
