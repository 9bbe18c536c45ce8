// The head of a job over ssh/pdsh (HeadPlan, plan.hpp): the node list from the
// flags, and what each agent is told.
#include <algorithm>

#include <fmt/format.h>

#include "launcher/config/cli.hpp"
#include "launcher/config/coordinator_options.hpp"
#include "launcher/config/log_prefix.hpp"
#include "launcher/config/plan.hpp"
#include "launcher/config/program_flags.hpp"
#include "launcher/config/straggler_flags.hpp"

namespace dlaunch::launcher {

namespace {

// What a head-node launch tags each line with, unless told otherwise.
constexpr const char* kHeadTag = "[{node_rank},{rank}]: ";

// The agent's --nproc-per-node for host `e`: a number the head knows, or the
// word for the node to resolve itself.
std::string WorkersArg(const HostEntry& e, const Options& o) {
  if (o.nproc_kind == NprocKind::kNumber || !e.only_slots.empty() || (!o.nproc_given && e.slots))
    return fmt::format("{}", WorkersOn(e, o.nproc_given, o.nproc));
  return o.nproc_kind == NprocKind::kAuto ? "auto" : o.nproc_kind == NprocKind::kGpu ? "gpu" : "cpu";
}

}  // namespace

Result<std::vector<HostEntry>> NodeList(const Options& o) {
  Result<std::vector<HostEntry>> hosts = std::vector<HostEntry>{};
  if (!o.hostfile.empty()) {
    Result<std::string> text = ReadHostfile(o.hostfile);
    if (!text.ok()) return text.status();
    hosts = ParseHostfile(*text, o.hostfile);
  } else if (!o.host_list.empty()) {
    hosts = ParseHostList(o.host_list, "-H");
  } else {
    for (const std::string& n : o.nodes) hosts->push_back(HostEntry{n, std::nullopt, {}});
  }
  if (!hosts.ok()) return hosts;
  hosts = FilterHosts(std::move(*hosts), o.include, o.exclude);
  if (!hosts.ok() || o.np == 0 || hosts->empty()) return hosts;
  // -np: horovodrun's and mpirun's fill, host by host in order, each up to its
  // slots (1 when it names none); hosts left with none are not used.
  std::vector<HostEntry> used;
  int left = o.np, slots = 0;
  for (HostEntry& e : *hosts) {
    const int has = e.only_slots.empty() ? e.slots.value_or(1) : static_cast<int>(e.only_slots.size());
    slots += has;
    if (left == 0) continue;
    const int take = std::min(has, left);
    left -= take;
    e.slots = take;
    if (e.only_slots.size() > static_cast<size_t>(take)) e.only_slots.resize(static_cast<size_t>(take));
    used.push_back(std::move(e));
  }
  if (left > 0) {
    return Status::InvalidArgument(fmt::format("-np: {} processes, but the {} host(s) of {} have {} slot(s) in all",
                                               o.np, hosts->size(), !o.hostfile.empty() ? o.hostfile : "-H", slots));
  }
  return used;
}

Result<HeadPlan> HeadPlanFor(const Options& o, const envmap::EnvMap& env, std::vector<HostEntry> hosts) {
  HeadPlan h;
  int n = static_cast<int>(hosts.size());
  if (o.max_nodes > 1 && o.max_nodes != n)
    return Status::InvalidArgument(fmt::format("--nnodes: {} given, but the node list has {} host(s)", o.max_nodes, n));
  for (const HostEntry& e : hosts) h.workers.push_back(WorkersArg(e, o));
  h.hosts = std::move(hosts);
  for (const std::string& x : o.exports) {
    if (std::optional<std::pair<std::string, std::string>> value = ExportValue(x, env))
      h.exports.push_back(std::move(*value));
    else
      h.exports_unset.push_back(x);
  }
  h.remote = o.remote;
  h.ssh_port = o.ssh_port;
  h.ssh_identity = o.ssh_identity;
  h.ssh_options = o.ssh_options;
  h.remote_dlaunch = o.remote_dlaunch;
  h.local_addr = o.local_addr;
  h.run_id = o.rdzv_id;
  Result<std::string> token = ResolveToken(o, env);
  if (!token.ok()) return token.status();
  h.token = *token;
  // The agents' environment is not the head's: TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE
  // travels as the tag it asks for.
  if (o.tag_format) {
    h.agent_flags.push_back("--tag-output=" + *o.tag_format);
  } else if (o.no_tag) {
    h.agent_flags.push_back("--no-tag");
  } else {
    Result<std::optional<std::string>> from_env = TagFromEnvironment(env);
    if (!from_env.ok()) return from_env.status();
    h.agent_flags.push_back("--tag-output=" + from_env->value_or(kHeadTag));
  }
  std::vector<std::string> forwarded = AgentFlags(o);
  h.agent_flags.insert(h.agent_flags.end(), forwarded.begin(), forwarded.end());
  if (o.after_dashdash || o.np > 0) h.command.push_back("--");  // -np: the command as given, on every node
  h.command.insert(h.command.end(), o.command.begin(), o.command.end());
  h.stop_signals = StopSignals(o);
  h.shutdown_timeout = o.shutdown_timeout;
  h.events = o.events;
  h.coordinator = CoordinatorOptionsFor(o, o.master_port, "", n, n, o.max_restarts, "");
  // The head hosts the coordinator, so it compares every node's ranks.
  Result<StragglerFlags> straggler = StragglerFlagsFor(o);
  if (!straggler.ok()) return straggler.status();
  h.straggler = std::move(*straggler);
  return h;
}

}  // namespace dlaunch::launcher
