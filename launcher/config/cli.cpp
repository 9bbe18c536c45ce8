// The command line's parser: reads argv against the flag table
// (flag_table.hpp), PET_ defaults first, and checks what needs the whole line.
#include "launcher/config/cli.hpp"

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "launcher/config/flag_table.hpp"
#include "launcher/config/plan.hpp"
#include "launcher/config/refused_flags.hpp"
#include "launcher/config/subcommands.hpp"
#include "launcher/config/torchrun_flags.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

// Written by hand rather than with Boost.Program_options: torchrun's command line
// is argparse's, where `--nproc_per_node` and `--nproc-per-node` are one flag, the
// first positional ends option parsing (everything after it belongs to the
// script), PET_<FLAG> variables supply defaults, and a misspelt flag should get a
// suggestion. None of that maps onto Program_options without fighting it.

namespace {

std::string Suggest(std::string_view name) {
  const Flag* best = nullptr;
  size_t best_d = 4;  // suggest only close names
  for (const Flag& f : Flags()) {
    size_t d = EditDistance(name, f.name);
    if (d < best_d) {
      best_d = d;
      best = &f;
    }
  }
  return best ? fmt::format(" (did you mean '--{}'?)", best->name) : "";
}

// A long flag that is not one of the table's names (dashed, no "--"), as
// torchrun's argparse reads it: an unambiguous prefix of one of torchrun's flags
// is that flag. Ambiguity is judged over torchrun's flags and dlaunch's together,
// so that `--node` is neither --node-rank nor --nodes. dlaunch's own flags are
// never shortened: they have no argparse habit to keep.
Result<const Flag*> FlagByPrefix(const std::string& name, const std::string& shown) {
  if (name.empty()) return Status::InvalidArgument(fmt::format("unknown flag '{}'", shown));
  std::vector<std::string> candidates = FlagsWithPrefix(name, FlagNames());
  bool torchrun =
      std::any_of(candidates.begin(), candidates.end(), [](const std::string& c) { return IsTorchrunFlag(c); });
  if (candidates.size() > 1 && torchrun) {
    std::vector<std::string> dashed;
    for (const std::string& c : candidates) dashed.push_back("--" + c);
    return Status::InvalidArgument(fmt::format("ambiguous flag '{}' (could be {})", shown, fmt::join(dashed, ", ")));
  }
  if (candidates.size() == 1 && torchrun) {
    if (const Flag* f = FindFlag(candidates[0])) return f;
    if (std::optional<std::string> refused = RefusedFlag(candidates[0])) return Status::InvalidArgument(*refused);
    return Status::InvalidArgument(
        fmt::format("unknown flag '{}' (torchrun's --{}, which dlaunch does not take)", shown, candidates[0]));
  }
  if (candidates.size() == 1)
    return Status::InvalidArgument(fmt::format("unknown flag '{}' (did you mean '--{}'?)", shown, candidates[0]));
  return Status::InvalidArgument(fmt::format("unknown flag '{}'{}", shown, Suggest(name)));
}

// torchrun reads no PET_ variable for logs-specs: argparse's plain action, not
// its env one. The recovery flags are dlaunch's own, which torchrun never had,
// and are read off Options::typed (recovery_flags.hpp, role_restarts.hpp).
bool TakesPetDefault(std::string_view name) {
  return name != "logs-specs" && name != "max-no-progress-restarts" && name != "restart-backoff" &&
         name != "role-restarts";
}

// PET_NPROC_PER_NODE and friends: torchrun takes each as the default of its flag.
Status ApplyPetDefaults(Options& o, const envmap::EnvMap& env) {
  for (const Flag& f : Flags()) {
    if (!TakesPetDefault(f.name)) continue;
    std::string var = "PET_" + Upper(f.name);
    for (char& c : var)
      if (c == '-') c = '_';
    auto it = env.find(var);
    if (it == env.end() || f.arity == Arity::kOptionalValue) continue;
    if (f.arity == Arity::kSwitch && (it->second.empty() || it->second == "0")) continue;
    Status s = f.set(o, it->second);
    if (!s.ok()) return Status::InvalidArgument(fmt::format("{} (from {})", s.message(), var));
    o.given[std::string(f.name)] = var;
  }
  // torchrun reads these as the flags' defaults: refused as the flags are.
  for (std::string_view name : RefusedFlagNames()) {
    std::string var = "PET_" + Upper(name);
    for (char& c : var)
      if (c == '-') c = '_';
    if (auto it = env.find(var); it != env.end() && !it->second.empty())
      return Status::InvalidArgument(fmt::format("{} (from {})", *RefusedFlag(name), var));
  }
  return Status::Ok();
}

}  // namespace

bool FixesLayout(const Options& o) {
  for (const auto& [name, from] : o.given)
    if (IsLayoutFlag(name)) return true;
  return false;
}

std::vector<int> StopSignals(const Options& o) {
  return o.signals_to_handle.empty() ? std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT} : o.signals_to_handle;
}

std::vector<std::string> AgentFlags(const Options& o) {
  std::vector<std::string> out;
  for (const auto& [name, value] : o.typed) {
    const Flag* flag = FindFlag(name);
    if (flag == nullptr || !ForAgents(name)) continue;
    std::string canonical = fmt::format("--{}", name);
    if (flag->arity == Arity::kOptionalValue && !value.empty()) canonical += "=" + value;
    out.push_back(canonical);
    if (flag->arity == Arity::kValue) out.push_back(value);
  }
  return out;
}

std::vector<std::string> FlagNames() {
  std::vector<std::string> names;
  for (const Flag& f : Flags()) names.emplace_back(f.name);
  return names;
}

int StdFor(const std::string& spec, int local_rank) {
  std::optional<int> all = ParseInt(spec);
  if (all) return (*all >= 0 && *all <= 3) ? *all : -1;
  int found = 0;
  for (const std::string& pair : Split(spec, ',')) {
    size_t colon = pair.find(':');
    if (colon == std::string::npos) return -1;
    std::optional<int> rank = ParseInt(pair.substr(0, colon));
    std::optional<int> v = ParseInt(pair.substr(colon + 1));
    if (!rank || !v || *v < 0 || *v > 3) return -1;
    if (*rank == local_rank) found = *v;
  }
  return found;
}

namespace {

// Reads the flag at args[i] (and its value, advancing i past it) into `o`.
// Returns the flag, or fails naming it.
Result<const Flag*> ReadFlag(const std::vector<std::string>& args, size_t& i, Options& o) {
  const std::string& arg = args[i];
  const Flag* flag = nullptr;
  std::string shown;  // the flag as the user wrote it, for messages
  std::optional<std::string> inline_value;
  // -np is horovodrun's and mpirun's one multi-letter flag with a single dash.
  const bool np = arg == "-np" || arg.rfind("-np=", 0) == 0;
  if (arg[1] == '-' || np) {
    std::string name = arg.substr(np ? 1 : 2);
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    shown = "--" + name;
    for (char& c : name)
      if (c == '_') c = '-';
    flag = FindFlag(name);
    if (!flag) {
      if (std::optional<std::string> refused = RefusedFlag(name)) return Status::InvalidArgument(*refused);
    }
    if (!flag && !np) {
      Result<const Flag*> by_prefix = FlagByPrefix(name, shown);
      if (!by_prefix.ok()) return by_prefix.status();
      flag = *by_prefix;
    }
    if (!flag) return Status::InvalidArgument(fmt::format("unknown flag '{}'{}", shown, Suggest(name)));
  } else {
    flag = arg.size() >= 2 ? FindShort(arg[1]) : nullptr;
    shown = arg.substr(0, 2);
    if (!flag) return Status::InvalidArgument(fmt::format("unknown flag '{}'", arg));
    if (arg.size() > 2) inline_value = arg.substr(arg[2] == '=' ? 3 : 2);
  }
  std::string value;
  switch (flag->arity) {
    case Arity::kSwitch:
      if (inline_value)
        return Status::InvalidArgument(fmt::format("--{}: takes no value, got '{}'", flag->name, *inline_value));
      break;
    case Arity::kOptionalValue:
      value = inline_value.value_or("");
      break;
    case Arity::kValue:
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return Status::InvalidArgument(fmt::format("--{}: expects a value", flag->name));
      }
      break;
  }
  if (Status s = flag->set(o, value); !s.ok()) return s;
  o.given[std::string(flag->name)] = fmt::format("--{}", flag->name);
  o.typed.emplace_back(flag->name, value);
  return flag;
}

// The checks that need the whole command line: combinations of flags.
Status CheckCombinations(const Options& o) {
  if (o.legacy_launch && o.no_python && !o.use_env)
    return Status::InvalidArgument(
        "--no-python: needs --use-env under --legacy-launch (the worker cannot take --local-rank)");
  if (o.module && o.no_python) return Status::InvalidArgument("--module: cannot be combined with --no-python");
  if (o.np > 0 && o.nproc_given)
    return Status::InvalidArgument("-np: counts the whole job's processes; give it or --nproc-per-node, not both");
  if (o.np > kMaxWorkersPerNode && o.nodes.empty() && o.hostfile.empty() && o.host_list.empty())
    return Status::InvalidArgument(
        fmt::format("-np: {} processes on this node is over the limit of {} (give the hosts with -H or --hostfile)",
                    o.np, kMaxWorkersPerNode));
  if (o.node_rank >= o.max_nodes)
    return Status::InvalidArgument(
        fmt::format("--node-rank: {} is outside the job's {} node(s)", o.node_rank, o.max_nodes));
  if (o.min_nodes != o.max_nodes && o.rdzv_endpoint.empty())
    return Status::InvalidArgument(
        fmt::format("--nnodes: elastic {}:{} needs --rdzv-endpoint", o.min_nodes, o.max_nodes));
  int lists = !o.nodes.empty() + !o.hostfile.empty() + !o.host_list.empty();
  if (lists > 1) return Status::InvalidArgument("--nodes, --hostfile and -H each give the node list: use one");
  if ((!o.include.empty() || !o.exclude.empty()) && lists == 0)
    return Status::InvalidArgument(
        fmt::format("--{}: needs a node list (--hostfile, -H or --nodes)", o.include.empty() ? "exclude" : "include"));
  // Here rather than in Decide, so that --explain refuses what a run would. A
  // head launch's node count is its list's: its agents check their share.
  bool head_launch = lists > 0 && o.rdzv_endpoint.empty();
  if (!o.roles.empty() && !head_launch) {
    int total = 0;  // at most kMaxWorkersPerNode: SetRoles checked the sum
    for (const envmap::RoleSpec& r : o.roles) total += r.count;
    // Across nodes, every node must know every task's address and port: the
    // rendezvous collects them (a node list without an endpoint is a head launch,
    // whose agents meet at one). torch.distributed.launch's static form cannot.
    if (o.max_nodes > 1 && o.rdzv_endpoint.empty())
      return Status::InvalidArgument(
          "--roles: across nodes the tasks meet through the rendezvous; give --rdzv-endpoint, or a node list (-H, "
          "--hostfile) without one");
    if (o.max_nodes > 1 && o.min_nodes != o.max_nodes)
      return Status::InvalidArgument(
          fmt::format("--roles: needs a fixed node count, got --nnodes {}:{}", o.min_nodes, o.max_nodes));
    if (o.nproc_given && o.nproc_kind == NprocKind::kNumber && static_cast<int64_t>(o.nproc) * o.max_nodes != total)
      return Status::InvalidArgument(
          o.max_nodes == 1 ? fmt::format("--roles: counts add up to {} but --nproc-per-node is {}", total, o.nproc)
                           : fmt::format("--roles: counts add up to {} but {} nodes of --nproc-per-node {} make {}",
                                         total, o.max_nodes, o.nproc, static_cast<int64_t>(o.nproc) * o.max_nodes));
    if (o.max_nodes > 1 && !o.nproc_given && total % o.max_nodes != 0)
      return Status::InvalidArgument(
          fmt::format("--roles: {} tasks do not split evenly over {} nodes; give each node's --nproc-per-node", total,
                      o.max_nodes));
  }
  // WORLD_SIZE is an int everywhere downstream.
  if (o.nproc_kind == NprocKind::kNumber &&
      static_cast<int64_t>(o.nproc) * o.max_nodes > std::numeric_limits<int32_t>::max())
    return Status::InvalidArgument(
        fmt::format("--nproc-per-node: {} nodes of {} workers make {}, over the limit of {} in a job", o.max_nodes,
                    o.nproc, static_cast<int64_t>(o.nproc) * o.max_nodes, std::numeric_limits<int32_t>::max()));
  return Status::Ok();
}

}  // namespace

Result<Options> ParseCommandLine(const std::vector<std::string>& args, const envmap::EnvMap& env) {
  Options o;
  if (Status s = ApplyPetDefaults(o, env); !s.ok()) return s;

  size_t i = 0;
  bool saw_flag = false;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      o.after_dashdash = true;
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the command starts here
    Result<const Flag*> flag = ReadFlag(args, i, o);
    if (!flag.ok()) return flag.status();
    // --explain asks about the run without changing it: `dlaunch --explain --
    // CMD` shows the entrypoint form's plan (sized to the node), as `dlaunch --
    // CMD` would run it.
    if (std::string_view((*flag)->name) != "explain") saw_flag = true;
  }
  o.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  // A head launch's --role-env values, in order; the first missing index ends
  // them (the head numbers them from 0 without gaps).
  for (size_t k = 0;; ++k) {
    auto it = env.find(fmt::format("{}{}", kRoleEnvVarPrefix, k));
    if (it == env.end()) break;
    if (Status s = AddRoleEnv(o, it->second); !s.ok())
      return Status::InvalidArgument(fmt::format("{} (from {}{})", s.message(), kRoleEnvVarPrefix, k));
  }

  if (o.help || o.version) return o;
  // srun's --multi-prog file names every rank's command itself.
  bool multi_prog = std::any_of(o.typed.begin(), o.typed.end(), [](const auto& f) { return f.first == "multi-prog"; });
  if (o.command.empty() && !o.explain && !multi_prog)
    return Status::InvalidArgument("no command to run (usage: dlaunch [flags] -- COMMAND [ARGS...])");
  if (multi_prog && !o.command.empty())
    return Status::InvalidArgument(fmt::format("--multi-prog: the file names each rank's command; got '{}' as well",
                                               PrintablePrefix(o.command[0], 40)));
  // Entrypoint form, `dlaunch -- python train.py`: no flags, so size the node itself.
  if (!saw_flag && o.after_dashdash && !o.nproc_given) o.nproc_kind = NprocKind::kAuto;
  if (Status s = CheckCombinations(o); !s.ok()) return s;
  // -np without a node list: this node runs them all (horovodrun's localhost:N).
  if (o.np > 0 && o.nodes.empty() && o.hostfile.empty() && o.host_list.empty()) {
    o.nproc = o.np;
    o.nproc_given = true;
  }
  return o;
}

std::string UsageText() {
  // As git's: the subcommands first, one line each, then the flags.
  std::string out =
      "usage: dlaunch [flags] -- COMMAND [ARGS...]\n"
      "       dlaunch [flags] SCRIPT.py [ARGS...]      (torchrun form: python is prepended)\n"
      "       dlaunch SUBCOMMAND [ARGS...]             (dlaunch SUBCOMMAND --help for its own)\n\n"
      "Subcommands:\n";
  for (const Subcommand& s : Subcommands()) out += fmt::format("  {:<12} {}\n", s.name, s.summary);
  out += "\nFlags take '--a-b' or '--a_b' spelling and '--flag value' or '--flag=value' (man dlaunch).\n";
  for (const Flag& f : Flags()) {
    std::string name = (f.short_name ? fmt::format("-{}, ", f.short_name) : "    ") + FlagSynopsis(f);
    out += fmt::format("  {:<30} {}\n", name, f.help);
  }
  return out;
}

}  // namespace dlaunch::launcher
