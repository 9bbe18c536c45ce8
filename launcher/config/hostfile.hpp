// The job's node list, as the launchers users come from write it: an Open MPI
// hostfile (`host slots=N max_slots=M`), a DeepSpeed hostfile (`host slots=N`,
// `#` comments), `host:N` lines, mpirun's `-H n1:4,n2:4`, and DeepSpeed's
// `--include` / `--exclude` filters. Pure but for ReadHostfile: the parsers take
// the file's text as a string.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/defaults.hpp"
#include "envmap/detect.hpp"
#include "base/status.hpp"

namespace dlaunch::launcher {

// The caps of a node list (base/defaults.hpp): workers on one node (slots,
// --nproc-per-node, --roles in all) and hosts in one list.
using base::kMaxHosts;
using base::kMaxWorkersPerNode;

struct HostEntry {
  std::string host;
  std::optional<int> slots;  // nullopt: the line named no count (take --nproc-per-node)
  // Slot ids left after --include/--exclude picked some (DeepSpeed's GPU ids, which
  // become CUDA_VISIBLE_DEVICES); empty: every slot.
  std::vector<int> only_slots;
};

// A host is a name, "[IPV6]" (the brackets are not kept in HostEntry::host), or, on
// a hostfile line only, a bare IPv6 literal ("fe80::1 slots=2"). A name with a
// control byte or a leading '-' is refused. Slots are at most kMaxWorkersPerNode,
// hosts at most kMaxHosts. Messages quote the input with Printable (\xNN escapes).

// The largest hostfile read: a million hosts at 64 bytes a line.
inline constexpr size_t kMaxHostfileBytes = 64 << 20;

// Reads the hostfile at `path`: a regular file of at most kMaxHostfileBytes (a FIFO
// would block and /dev/zero never end). Fails with InvalidArgument naming the
// path after `subject`: "--hostfile PATH: not a regular file", "... cannot read
// (REASON)". `dlaunch job` reads its spec with it too ("job spec PATH: ...").
Result<std::string> ReadHostfile(const std::string& path, std::string_view subject = "--hostfile");

// Parses a hostfile's text; `name` is the file's path, for messages. A host may
// appear once. Fails with InvalidArgument "hostfile NAME:LINE: expected 'slots=N',
// got 'slot=4'" and the like, or "hostfile NAME: no hosts".
Result<std::vector<HostEntry>> ParseHostfile(std::string_view text, const std::string& name);

// Parses mpirun's -H list: "n1:4,n2:4", "n1,n2" or "[fe80::1]:4". Fails naming
// `flag` and the entry; a bare IPv6 literal is ambiguous there ("2001:db8::1:8").
Result<std::vector<HostEntry>> ParseHostList(std::string_view list, const std::string& flag);

// Applies DeepSpeed's filters, at most one of them non-empty. `include`: only the
// hosts named ("n1@n2:0,2": all of n1, slots 0 and 2 of n2). `exclude`: every host
// but those named, or without the slots named. A host named twice gets the union
// ("n1:0@n1:1" is slots 0 and 1). Slots need a known count. Fails
// naming the flag and the host or slot that is not in the list, or when nothing
// is left.
Result<std::vector<HostEntry>> FilterHosts(std::vector<HostEntry> hosts, const std::string& include,
                                           const std::string& exclude);

// Workers on that node: the slots picked by a filter, else --nproc-per-node when
// given, else the slots the list names, else `nproc`.
int WorkersOn(const HostEntry& entry, bool nproc_given, int nproc);

}  // namespace dlaunch::launcher
