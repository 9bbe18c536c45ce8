#include "launcher/config/colon_groups.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/config/command.hpp"
#include "launcher/config/multi_prog.hpp"
#include "launcher/config/plan.hpp"
#include "launcher/config/programs_codec.hpp"
#include "launcher/config/program_flags.hpp"
#include "launcher/config/role_restarts.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

namespace {

// What each group says for itself, mpirun's app context options: its count,
// role, command, variables, dialects, hosts and GPUs.
constexpr std::array<std::string_view, 11> kGroupFlags = {
    "nproc-per-node", "np", "role", "export", "env", "host", "hostfile", "gpus", "module", "no-python", "run-path",
};

// "\:" and "\\:": backslashes and a colon, nothing else.
bool EscapedColon(std::string_view arg) {
  return arg.size() >= 2 && arg.back() == ':' && arg.find_first_not_of('\\') == arg.size() - 1;
}

}  // namespace

namespace {

bool Typed(const Options& o, std::string_view name) {
  for (const auto& [flag, value] : o.typed)
    if (flag == name) return true;
  return false;
}

std::string Label(size_t index, const std::string& role) {
  return role.empty() ? fmt::format("group {}", index + 1) : fmt::format("group {} ({})", index + 1, role);
}

// The role a group's --role gave, else "group<N>": each group needs a name of
// its own (ROLE_NAME), and torchrun's "default" would do for one only.
std::string RoleName(const Options& o, size_t index) {
  return Typed(o, "role") ? o.role : fmt::format("group{}", index + 1);
}

// One group of the line, its flags parsed as a command line of its own.
Result<envmap::ProgramGroup> GroupOf(const Options& o, size_t index, const envmap::EnvMap& env, int* per_node) {
  envmap::ProgramGroup g;
  g.role = RoleName(o, index);
  g.line = fmt::format("group {}", index + 1);
  std::string label = Label(index, g.role);
  // torchrun's default of one worker; `auto` and the like size a whole node.
  if (o.nproc_given && o.nproc_kind != NprocKind::kNumber)
    return Status::InvalidArgument(fmt::format("{}: give its count as a number (--nproc-per-node N or -np N)", label));
  *per_node = o.nproc_given ? o.nproc : 1;
  g.argv = WorkerArgv(o, env);
  g.local_rank_arg_at = LocalRankArgAt(o, g.argv);
  Result<envmap::EnvVars> exports = GroupExports(o, env);
  if (!exports.ok()) return Status::InvalidArgument(fmt::format("{}: {}", label, exports.status().message()));
  g.env = std::move(*exports);
  g.ompi = o.env_ompi;
  g.azure = o.env_azure;
  g.horovod = o.env_horovod;
  Result<std::vector<std::string>> gpus = GroupGpus(o);
  if (!gpus.ok()) return Status::InvalidArgument(fmt::format("{}: {}", label, gpus.status().message()));
  g.gpus = std::move(*gpus);
  return g;
}

// --env tf, in any of the --env values typed.
bool AsksTfConfig(const Options& o) {
  for (const auto& [name, value] : o.typed) {
    if (name != "env") continue;
    for (const std::string& dialect : Split(value, ','))
      if (dialect == "tf") return true;
  }
  return false;
}

// A later group may give only what is its own.
Status OnlyGroupFlags(const Options& o, size_t index, bool head) {
  for (const auto& [name, value] : o.typed) {
    if (IsGroupFlagName(name)) continue;
    return Status::InvalidArgument(fmt::format("{}: --{} applies to the whole job; give it before the first ':'",
                                               Label(index, RoleName(o, index)), name));
  }
  if (o.env_horovod)
    return Status::InvalidArgument(
        fmt::format("{}: --env horovod serves one store for the whole job; give it before the first ':'",
                    Label(index, RoleName(o, index))));
  if (AsksTfConfig(o))
    return Status::InvalidArgument(
        fmt::format("{}: --env tf describes the whole job's tasks; give it before the first ':'",
                    Label(index, RoleName(o, index))));
  if (!head && (!o.host_list.empty() || !o.hostfile.empty()))
    return Status::InvalidArgument(
        fmt::format("{}: hosts of its own (-H, --hostfile) need a head launch with a node list before the first ':'",
                    Label(index, RoleName(o, index))));
  return Status::Ok();
}

Result<Options> ParseGroup(const std::vector<std::string>& segment, size_t index, const envmap::EnvMap& env) {
  if (segment.empty())
    return Status::InvalidArgument(fmt::format("group {}: is empty (nothing between the ':'s)", index + 1));
  // PET_ defaults are torchrun's for its one group; later groups take none.
  Result<Options> o = ParseCommandLine(segment, index == 0 ? env : envmap::EnvMap{});
  if (!o.ok()) {
    std::string message = o.status().message();
    if (message.starts_with("no command to run"))
      message = index == 0 ? "no command before the first ':'" : "no command after ':'";
    // Before the first ':' a job flag's message stands as it is: the flag is the job's.
    std::string_view flag = std::string_view(message).substr(0, message.find(':'));
    if (index == 0 && flag.starts_with("--") && !IsGroupFlagName(flag.substr(2))) return o.status();
    return Status::InvalidArgument(fmt::format("group {}: {}", index + 1, message));
  }
  if (o->command.empty())
    return Status::InvalidArgument(
        fmt::format("group {}: no command{}", index + 1, index == 0 ? " before the first ':'" : " after ':'"));
  return o;
}

// A head launch: each group's hosts (its own -H or --hostfile, else the first
// group's) and its count on each, as mpirun places app contexts; the job's
// node list becomes every host named, in the order first named, each with the
// sum of its groups' counts (what its agent runs).
Status HeadNodes(const std::vector<Options>& parsed, JobLine& line) {
  Options& job = line.options;
  if (!job.include.empty() || !job.exclude.empty())
    return Status::InvalidArgument("--include, --exclude: not with several groups; give each group its own hosts");
  const size_t groups = parsed.size();
  Result<std::vector<HostEntry>> base = NodeList(parsed[0]);
  if (!base.ok())
    return Status::InvalidArgument(
        fmt::format("{}: {}", Label(0, line.programs.groups[0].role), base.status().message()));
  std::vector<std::string> order;
  std::map<std::string, size_t> at;
  std::vector<std::vector<int>>& counts = line.programs.node_counts;
  for (size_t g = 0; g < groups; ++g) {
    const Options& o = parsed[g];
    bool own = g == 0 || !o.host_list.empty() || !o.hostfile.empty();
    Result<std::vector<HostEntry>> hosts = own ? NodeList(o) : base;
    if (!hosts.ok())
      return Status::InvalidArgument(
          fmt::format("{}: {}", Label(g, line.programs.groups[g].role), hosts.status().message()));
    for (const HostEntry& e : *hosts) {
      int n = own ? WorkersOn(e, o.nproc_given, o.nproc) : line.programs.per_node[g];
      auto [it, fresh] = at.emplace(e.host, order.size());
      if (fresh) {
        order.push_back(e.host);
        counts.emplace_back(groups, 0);
      }
      counts[it->second][g] += n;
    }
  }
  std::vector<std::string> list;
  for (size_t i = 0; i < order.size(); ++i) {
    // Each group's count on a host is at most the limit, but the groups are many.
    std::int64_t sum = 0;
    for (int n : counts[i]) sum += n;
    if (sum > kMaxWorkersPerNode)
      return Status::InvalidArgument(fmt::format("host {}: the groups place {} workers there, over the limit of {}",
                                                 order[i], sum, kMaxWorkersPerNode));
    list.push_back(fmt::format("{}:{}", order[i], sum));
  }
  // -x before the first ':' is the first group's (GroupOf took it), not every agent's.
  job.exports.clear();
  job.host_list = fmt::format("{}", fmt::join(list, ","));
  job.hostfile.clear();
  job.nodes.clear();
  job.np = 0;
  job.nproc = 1;
  job.nproc_kind = NprocKind::kNumber;
  job.nproc_given = false;
  return Status::Ok();
}

}  // namespace

bool IsGroupFlagName(std::string_view name) {
  return std::find(kGroupFlags.begin(), kGroupFlags.end(), name) != kGroupFlags.end();
}

bool IsGroupFlag(std::string_view arg) {
  if (arg == "-np" || arg.starts_with("-np=")) return true;
  if (arg.starts_with("--")) {
    std::string name(
        arg.substr(2, arg.find('=') == std::string_view::npos ? std::string_view::npos : arg.find('=') - 2));
    std::replace(name.begin(), name.end(), '_', '-');
    return IsGroupFlagName(name);
  }
  return arg.size() >= 2 && arg[0] == '-' && (arg[1] == 'x' || arg[1] == 'H' || arg[1] == 'm');
}

std::vector<std::vector<std::string>> SplitGroups(const std::vector<std::string>& args) {
  std::vector<std::vector<std::string>> groups(1);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    bool next_opens = i + 1 < args.size() && (args[i + 1] == "--" || IsGroupFlag(args[i + 1]));
    if (arg == ":" && next_opens) {
      groups.emplace_back();
      continue;
    }
    groups.back().push_back(EscapedColon(arg) ? arg.substr(1) : arg);
  }
  return groups;
}

Result<JobLine> ParseJobLine(const std::vector<std::string>& args, const envmap::EnvMap& env) {
  std::vector<std::vector<std::string>> segments = SplitGroups(args);
  JobLine line;
  // One group: parsed as always, its messages ParseCommandLine's own.
  Result<Options> first = segments.size() == 1 ? ParseCommandLine(args, env) : ParseGroup(segments[0], 0, env);
  if (!first.ok()) return first.status();
  line.options = *first;
  if (line.options.help || line.options.version) return line;
  Result<std::map<std::string, int>> restarts = RoleRestartsFor(line.options);
  if (!restarts.ok()) return restarts.status();
  line.programs.restarts.assign(restarts->begin(), restarts->end());
  Result<std::string> multi_prog = MultiProgFile(line.options);
  if (!multi_prog.ok()) return multi_prog.status();
  line.programs.tf = AsksTfConfig(line.options);
  if (segments.size() == 1) {
    if (line.programs.tf && env.find(std::string(kProgramsVar)) == env.end())
      return Status::InvalidArgument(
          "--env tf: TF_CONFIG describes several groups (--role chief, worker, ps, evaluator between ':'s); with one "
          "command give --roles");
    // An agent of a head launch: the groups come from its head, over stdin.
    if (auto it = env.find(std::string(kProgramsVar)); it != env.end()) {
      Result<envmap::ProgramPlan> programs = DecodePrograms(it->second);
      if (!programs.ok()) return programs.status();
      line.programs = std::move(*programs);
      return line;
    }
    if (!multi_prog->empty()) {
      Result<std::string> text = ReadMultiProgText(*multi_prog);
      if (!text.ok()) return text.status();
      line.programs.multi_prog_file = *multi_prog;
      line.programs.multi_prog_text = std::move(*text);
    } else if (!line.programs.restarts.empty()) {
      return Status::InvalidArgument(
          "--role-restarts: the job runs one group; give several (':' between them) or --multi-prog");
    }
    return line;
  }
  if (!multi_prog->empty())
    return Status::InvalidArgument("--multi-prog: the file gives the groups; not with ':' between groups as well");
  // A node list without an endpoint: this dlaunch is the head, and each group
  // may name hosts of its own.
  const bool head =
      (!first->nodes.empty() || !first->hostfile.empty() || !first->host_list.empty()) && first->rdzv_endpoint.empty();
  std::vector<Options> parsed;
  int total = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    Result<Options> o = i == 0 ? first : ParseGroup(segments[i], i, env);
    if (!o.ok()) return o.status();
    parsed.push_back(*o);
    if (i > 0) {
      if (Status s = OnlyGroupFlags(*o, i, head); !s.ok()) return s;
    }
    int per_node = 0;
    Result<envmap::ProgramGroup> g = GroupOf(*o, i, env, &per_node);
    if (!g.ok()) return g.status();
    for (const envmap::ProgramGroup& other : line.programs.groups) {
      if (other.role == g->role)
        return Status::InvalidArgument(fmt::format("{}: role '{}' is named by {} too (give each group its own --role)",
                                                   Label(i, g->role), g->role, other.line));
    }
    line.programs.groups.push_back(std::move(*g));
    line.programs.per_node.push_back(per_node);
    total += per_node;
    if (!head && total > kMaxWorkersPerNode)
      return Status::InvalidArgument(fmt::format("{}: the groups make {} workers a node, over the limit of {}",
                                                 Label(i, line.programs.groups.back().role), total,
                                                 kMaxWorkersPerNode));
  }
  if (head) {
    if (Status s = HeadNodes(parsed, line); !s.ok()) return s;
    return line;
  }
  // Decide sizes the node to every group's workers; its dialects are the first
  // group's (later ones add their own), and its command the first group's.
  Options& o = line.options;
  // Each group's count was checked against the job's limit alone; their sum
  // on every node must fit too (WORLD_SIZE is an int downstream).
  if (std::int64_t world = std::int64_t{total} * o.max_nodes; world > std::numeric_limits<std::int32_t>::max())
    return Status::InvalidArgument(
        fmt::format("the groups make {} workers a node, and {} nodes of them {}, over the limit of {} in a job", total,
                    o.max_nodes, world, std::numeric_limits<std::int32_t>::max()));
  o.nproc = total;
  o.nproc_kind = NprocKind::kNumber;
  o.nproc_given = true;
  o.np = 0;
  o.given["nproc-per-node"] = "--nproc-per-node";
  return line;
}

}  // namespace dlaunch::launcher
