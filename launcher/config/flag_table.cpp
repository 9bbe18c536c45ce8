// The flag table and each flag's setter (flag_table.hpp). About 470 lines: one
// setter per flag that checks its value, beside the table that names it and
// documents it for --help, the man page and the completion.
#include "launcher/config/flag_table.hpp"

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "launcher/config/health_flags.hpp"
#include "launcher/config/hostfile.hpp"
#include "launcher/config/plan.hpp"
#include "launcher/config/rdzv_conf.hpp"
#include "launcher/config/recovery_flags.hpp"
#include "launcher/config/program_flags.hpp"
#include "launcher/config/role_restarts.hpp"
#include "launcher/config/straggler_flags.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {
namespace {

Status Bad(const std::string& flag, const std::string& what, const std::string& value) {
  return Status::InvalidArgument(fmt::format("--{}: expected {}, got '{}'", flag, what, Printable(value)));
}

Status SetNp(Options& o, const std::string& v) {
  std::optional<int> n = ParseInt(v);
  if (!n || *n < 1) return Bad("np", "a positive number of processes", v);
  o.np = *n;
  return Status::Ok();
}

Status SetNproc(Options& o, const std::string& v) {
  o.nproc_given = true;
  if (v == "auto") {
    o.nproc_kind = NprocKind::kAuto;
    return Status::Ok();
  }
  if (v == "gpu") {
    o.nproc_kind = NprocKind::kGpu;
    return Status::Ok();
  }
  if (v == "cpu") {
    o.nproc_kind = NprocKind::kCpu;
    return Status::Ok();
  }
  std::optional<int> n = ParseInt(v);
  if (!n || *n < 1) return Bad("nproc-per-node", "a positive number, 'auto', 'gpu' or 'cpu'", v);
  if (*n > kMaxWorkersPerNode)
    return Status::InvalidArgument(
        fmt::format("--nproc-per-node: {} is over the limit of {} workers per node", *n, kMaxWorkersPerNode));
  o.nproc_kind = NprocKind::kNumber;
  o.nproc = *n;
  return Status::Ok();
}

Status SetNnodes(Options& o, const std::string& v) {
  std::string_view sv = v;
  size_t colon = sv.find(':');
  std::optional<int> lo = ParseInt(sv.substr(0, colon));
  std::optional<int> hi = colon == std::string_view::npos ? lo : ParseInt(sv.substr(colon + 1));
  if (!lo || !hi || *lo < 1 || *hi < *lo) return Bad("nnodes", "N or MIN:MAX with 1 <= MIN <= MAX", v);
  if (static_cast<uint64_t>(*hi) > kMaxHosts)
    return Status::InvalidArgument(fmt::format("--nnodes: {} is over the limit of {} nodes", *hi, kMaxHosts));
  o.min_nodes = *lo;
  o.max_nodes = *hi;
  return Status::Ok();
}

// An integer flag with a lower bound.
Setter IntFlag(const char* flag, int min, int Options::*field) {
  return [=](Options& o, const std::string& v) {
    std::optional<int> n = ParseInt(v);
    if (!n || *n < min) return Bad(flag, min == 0 ? "a number >= 0" : "a positive number", v);
    o.*field = *n;
    return Status::Ok();
  };
}

Setter StringFlag(std::string Options::*field) {
  return [=](Options& o, const std::string& v) {
    o.*field = v;
    return Status::Ok();
  };
}

Setter SwitchFlag(bool Options::*field) {
  return [=](Options& o, const std::string&) {
    o.*field = true;
    return Status::Ok();
  };
}

Status SetMasterPort(Options& o, const std::string& v) {
  std::optional<int> n = ParseInt(v);
  if (!n || *n < 1 || *n > 65535) return Bad("master-port", "a port from 1 to 65535", v);
  o.master_port = *n;
  return Status::Ok();
}

Status SetShutdownTimeout(Options& o, const std::string& v) {
  // 0 is meaningful: SIGKILL at once. "inf" is not a way to say "never".
  std::optional<std::chrono::milliseconds> t = ParseSeconds(v, /*allow_zero=*/true);
  if (!t) return Bad("shutdown-timeout", fmt::format("seconds from 0 to {}", static_cast<long long>(kMaxSeconds)), v);
  o.shutdown_timeout = *t;
  return Status::Ok();
}

Status SetHangTimeout(Options& o, const std::string& v) {
  std::optional<std::chrono::milliseconds> t = ParseSeconds(v, /*allow_zero=*/true);
  if (!t) return Bad("hang-timeout", fmt::format("seconds from 0 (off) to {}", static_cast<long long>(kMaxSeconds)), v);
  o.hang_timeout = *t;
  return Status::Ok();
}

Status SetHangAction(Options& o, const std::string& v) {
  if (v != "report" && v != "stop") return Bad("hang-action", "report or stop", v);
  o.hang_stop = v == "stop";
  return Status::Ok();
}

Setter StdFlag(const char* flag, std::string Options::*field) {
  return [=](Options& o, const std::string& v) {
    if (StdFor(v, 0) < 0) return Bad(flag, "0-3 or a map like '0:1,1:2'", v);
    o.*field = v;
    return Status::Ok();
  };
}

Status SetLocalRanksFilter(Options& o, const std::string& v) {
  o.local_ranks_filter.clear();
  for (const std::string& part : Split(v, ',')) {
    std::optional<int> n = ParseInt(part);
    if (!n || *n < 0) return Bad("local-ranks-filter", "local ranks like '0,2'", v);
    o.local_ranks_filter.push_back(*n);
  }
  return Status::Ok();
}

Status SetSignals(Options& o, const std::string& v) {
  o.signals_to_handle.clear();
  for (const std::string& name : Split(v, ',')) {
    int sig = SignalNumber(name);
    if (sig <= 0) return Bad("signals-to-handle", "signal names like 'SIGTERM,SIGINT'", v);
    o.signals_to_handle.push_back(sig);
  }
  return Status::Ok();
}

Status SetEnvFlavor(Options& o, const std::string& v) {
  for (const std::string& name : Split(v, ',')) {
    if (name == "ompi")
      o.env_ompi = true;
    else if (name == "azure")
      o.env_azure = true;
    else if (name == "horovod")
      o.env_horovod = true;
    else if (name == "torch" || name == "pytorch" || name == "tf") {
    }  // torch: always on; tf: TF_CONFIG from several groups (colon_groups.hpp reads it)
    else
      return Bad("env", "a list of ompi, azure, horovod, tf", v);
  }
  return Status::Ok();
}

Status SetRoles(Options& o, const std::string& v) {
  o.roles.clear();
  int64_t total = 0;
  for (const std::string& part : Split(v, ',')) {
    size_t colon = part.find(':');
    std::optional<int> n = colon == std::string::npos ? std::optional<int>(1) : ParseInt(part.substr(colon + 1));
    std::string name = part.substr(0, colon);
    if (name.empty() || !n || *n < 1) return Bad("roles", "ROLE:COUNT pairs like 'chief:1,worker:2,ps:1'", v);
    o.roles.push_back(envmap::RoleSpec{name, *n, {}});
    total += *n;  // int64: two counts of 2^30 must not wrap
  }
  if (total > kMaxWorkersPerNode)
    return Status::InvalidArgument(
        fmt::format("--roles: {} workers in all is over the limit of {} workers per node", total, kMaxWorkersPerNode));
  return Status::Ok();
}

// --role-env ROLE:NAME=VALUE. Roles must come first so that a typo in the role is caught.

}  // namespace

Status AddRoleEnv(Options& o, const std::string& v) {
  size_t colon = v.find(':');
  size_t eq = v.find('=', colon == std::string::npos ? 0 : colon);
  if (colon == std::string::npos || eq == std::string::npos || eq == colon + 1)
    return Bad("role-env", "ROLE:NAME=VALUE", v);
  std::string role = v.substr(0, colon);
  for (envmap::RoleSpec& spec : o.roles) {
    if (spec.name == role) {
      spec.env.emplace_back(v.substr(colon + 1, eq - colon - 1), v.substr(eq + 1));
      return Status::Ok();
    }
  }
  return Status::InvalidArgument(fmt::format("--role-env: role '{}' is not in --roles (give --roles first)", role));
}

namespace {

Status SetBindTo(Options& o, const std::string& v) {
  if (v != "none" && v != "core" && v != "numa") return Bad("bind-to", "none, core or numa", v);
  o.bind_to = v;
  return Status::Ok();
}

Status Ignore(Options&, const std::string&) { return Status::Ok(); }

// torchrun's etcd backends need an etcd server; dlaunch's nodes meet at its own
// coordinator and cannot speak etcd. Taken for c10d, the etcd endpoint would be
// dialled (or hosted) as a dlaunch coordinator.
Status SetRdzvBackend(Options& o, const std::string& v) {
  if (v == "etcd" || v == "etcd-v2")
    return Status::InvalidArgument(fmt::format(
        "--rdzv-backend: '{}' is not supported: dlaunch speaks its own rendezvous, not etcd's; use --rdzv-backend c10d "
        "with --rdzv-endpoint HOST:PORT of a node (node rank 0 hosts it) or of `dlaunch coordinator`",
        v));
  o.rdzv_backend = v;
  return Status::Ok();
}

// torchrun's --logs-specs names a Python entry point (torchrun.logs_specs) that
// torchrun loads and calls; dlaunch runs no Python of its own.
Status RefuseLogsSpecs(Options&, const std::string& v) {
  return Status::InvalidArgument(fmt::format(
      "--logs-specs: '{}' names a Python LogsSpecs plug-in, which dlaunch cannot load; use --log-dir, --redirects, "
      "--tee and --local-ranks-filter",
      Printable(v)));
}

// Strips an IPv6 literal's brackets, "[fe80::1]", as -H and hostfiles do.
std::string BareHost(const std::string& host) {
  return host.size() > 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
}

Status SetNodes(Options& o, const std::string& v) {
  o.nodes.clear();
  std::vector<std::string> hosts = Split(v, ',');
  if (hosts.size() > kMaxHosts) return Status::InvalidArgument(fmt::format("--nodes: more than {} hosts", kMaxHosts));
  // A host named twice would silently shift the node ranks, as in -H and hostfiles.
  std::map<std::string, size_t> rank;
  for (const std::string& host : hosts) {
    if (host.empty()) return Bad("nodes", "a list of hosts like 'n1,n2'", v);
    auto [it, fresh] = rank.emplace(BareHost(host), o.nodes.size());
    if (!fresh)
      return Status::InvalidArgument(fmt::format("--nodes: host '{}' is listed twice (node ranks {} and {})",
                                                 Printable(it->first), it->second, o.nodes.size()));
    o.nodes.push_back(it->first);
  }
  return Status::Ok();
}

Status SetRdzvToken(Options& o, const std::string& v) {
  // An empty token would turn authentication off without a word.
  if (v.empty()) return Status::InvalidArgument("--rdzv-token: empty token");
  o.rdzv_token = v;
  return Status::Ok();
}

Status SetRdzvId(Options& o, const std::string& v) {
  // The wire takes strings up to 4 KiB and never truncates: refuse here, not mid-handshake.
  constexpr size_t kMaxRunId = 1024;
  if (v.size() > kMaxRunId)
    return Status::InvalidArgument(fmt::format("--rdzv-id: {} bytes is over the limit of {}", v.size(), kMaxRunId));
  o.rdzv_id = v;
  return Status::Ok();
}

Status SetExport(Options& o, const std::string& v) {
  std::string name = v.substr(0, v.find('='));
  bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok) return Bad("export", "NAME or NAME=VALUE", v);
  o.exports.push_back(v);
  return Status::Ok();
}

Status SetSshOption(Options& o, const std::string& v) {
  size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0) return Bad("ssh-option", "KEY=VALUE (as ssh -o takes)", v);
  o.ssh_options.push_back(v);
  return Status::Ok();
}

Status SetRemote(Options& o, const std::string& v) {
  if (v != "ssh" && v != "pdsh") return Bad("remote", "ssh or pdsh", v);
  o.remote = v;
  return Status::Ok();
}

Status SetLaunchMode(Options& o, const std::string& v) {
  if (v != "per-process" && v != "per-node") return Bad("launch-mode", "per-process or per-node", v);
  o.launch_mode = v;
  return Status::Ok();
}

Status SetSshPort(Options& o, const std::string& v) {
  std::optional<int> n = ParseInt(v);
  if (!n || *n < 1 || *n > 65535) return Bad("ssh-port", "a port from 1 to 65535", v);
  o.ssh_port = *n;
  return Status::Ok();
}

bool Listed(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

bool IsLayoutFlag(std::string_view name) {
  return Listed(name, {"nnodes", "node-rank", "master-addr", "master-port", "nodes", "hostfile", "host", "standalone"});
}

// What a head-node launch passes on to every agent, as the user typed it: how
// each node runs, supervises and shows its workers. Every other flag is the
// head's own (HeadOnly); a test holds each flag to exactly one of the two.
bool ForAgents(std::string_view name) {
  return Listed(name, {"rdzv-conf",
                       "launch-mode",
                       "max-restarts",
                       "spares",
                       "max-no-progress-restarts",
                       "restart-backoff",
                       "role-restarts",
                       "monitor-interval",
                       "start-method",
                       "role",
                       "module",
                       "no-python",
                       "run-path",
                       "log-dir",
                       "redirects",
                       "tee",
                       "local-ranks-filter",
                       "shutdown-timeout",
                       "hang-timeout",
                       "hang-action",
                       "straggler-window",
                       "straggler-action",
                       "straggler-ignore",
                       "straggler-threshold",
                       "straggler-native",
                       "straggler-file",
                       "health-check",
                       "health-check-timeout",
                       "health-check-interval",
                       "no-python-hook",
                       "signals-to-handle",
                       "legacy-launch",
                       "use-env",
                       "local-rank-underscore",
                       "env",
                       "roles",
                       "role-env",
                       "gpus",
                       "multi-prog",
                       "bind-to",
                       "pin-gpu",
                       "metrics-addr",
                       "virtual-local-rank"});
}

// The head decides each agent's nodes, workers, rendezvous and tags itself, and
// keeps its ssh connection and its own questions (help, explain) to itself.
bool HeadOnly(std::string_view name) {
  return Listed(name,
                {"nproc-per-node", "np",           "nnodes",        "node-rank",  "master-addr",    "master-port",
                 "local-addr",     "rdzv-backend", "rdzv-endpoint", "rdzv-id",    "rdzv-token",     "rdzv-token-file",
                 "nodes",          "hostfile",     "host",          "include",    "exclude",        "remote",
                 "ssh-port",       "ssh-identity", "ssh-option",    "export",     "remote-dlaunch", "explain",
                 "logs-specs",     "events",       "standalone",    "tag-output", "no-tag",         "help",
                 "version"});
}

// One row a flag (name, arity, setter, help, documentation). A table, not
// logic: it runs past 80 lines because every flag is in it, and splitting it
// would only scatter the flags that --help, the man page and the completion
// list in this order.
const std::vector<Flag>& Flags() {
  static const std::vector<Flag> flags = {
      {"nproc-per-node",
       0,
       Arity::kValue,
       SetNproc,
       "workers on this node: N, auto, gpu or cpu (default 1)",
       {.value = "N",
        .choices = "auto gpu cpu",
        .torchrun = true,
        .others = "mpirun -np (per node: --map-by ppr:N:node)"}},
      {"nnodes",
       0,
       Arity::kValue,
       SetNnodes,
       "nodes: N or MIN:MAX (default 1)",
       {.value = "N|MIN:MAX", .torchrun = true, .others = "mpirun -H, --hostfile"}},
      {"node-rank",
       0,
       Arity::kValue,
       [](Options& o, const std::string& v) {
         o.node_rank_given = true;
         return IntFlag("node-rank", 0, &Options::node_rank)(o, v);
       },
       "this node's rank",
       {.value = "R", .torchrun = true, .others = "torch.distributed.launch --node_rank"}},
      {"master-addr",
       0,
       Arity::kValue,
       StringFlag(&Options::master_addr),
       "address of node rank 0 (default 127.0.0.1)",
       {.value = "ADDR",
        .kind = ValueKind::kHost,
        .torchrun = true,
        .others = "torch.distributed.launch --master_addr"}},
      {"master-port",
       0,
       Arity::kValue,
       SetMasterPort,
       "port on node rank 0 (default: a free port)",
       {.value = "PORT", .torchrun = true, .others = "torch.distributed.launch --master_port"}},
      {"local-addr",
       0,
       Arity::kValue,
       StringFlag(&Options::local_addr),
       "this node's advertised address",
       {.value = "ADDR", .kind = ValueKind::kHost, .torchrun = true}},
      {"rdzv-backend",
       0,
       Arity::kValue,
       SetRdzvBackend,
       "accepted for torchrun compatibility (not etcd, etcd-v2)",
       {.value = "NAME", .choices = "c10d static", .torchrun = true}},
      {"rdzv-endpoint",
       0,
       Arity::kValue,
       StringFlag(&Options::rdzv_endpoint),
       "rendezvous HOST:PORT",
       {.value = "HOST:PORT", .torchrun = true}},
      {"rdzv-id", 0, Arity::kValue, SetRdzvId, "job id (TORCHELASTIC_RUN_ID)", {.value = "ID", .torchrun = true}},
      {"rdzv-conf",
       0,
       Arity::kValue,
       SetRdzvConf,
       "is_host=0|1, join_timeout, last_call_timeout, heartbeat_timeout (s)",
       {.value = "KEY=VALUE,...", .torchrun = true}},
      {"rdzv-token",
       0,
       Arity::kValue,
       SetRdzvToken,
       "shared secret for the rendezvous (or DLAUNCH_RDZV_TOKEN)",
       {.value = "TOKEN"}},
      {"rdzv-token-file",
       0,
       Arity::kValue,
       StringFlag(&Options::rdzv_token_file),
       "file holding the rendezvous secret (mode 600)",
       {.value = "FILE", .kind = ValueKind::kFile}},
      {"nodes",
       0,
       Arity::kValue,
       SetNodes,
       "the job's hosts; node rank = position",
       {.value = "HOST,...", .kind = ValueKind::kHost, .others = "mpirun -H"}},
      {"hostfile",
       0,
       Arity::kValue,
       StringFlag(&Options::hostfile),
       "file of the job's hosts, one per line; node rank = position",
       {.value = "FILE", .kind = ValueKind::kFile, .others = "mpirun --hostfile; DeepSpeed --hostfile"}},
      {"host",
       'H',
       Arity::kValue,
       StringFlag(&Options::host_list),
       "the job's hosts as mpirun's -H: n1:8,n2:8; node rank = position",
       {.value = "HOST[:N],...", .kind = ValueKind::kHost, .others = "mpirun -H, --host"}},
      {"np",
       0,
       Arity::kValue,
       SetNp,
       "horovodrun/mpirun's -np: N processes in all, filling the node list's slots in order; runs the command as given",
       {.value = "N", .others = "horovodrun -np, mpirun -np"}},
      {"include",
       0,
       Arity::kValue,
       StringFlag(&Options::include),
       "DeepSpeed filter: only these hosts/slots, e.g. n1@n2:0,1",
       {.value = "HOST[:SLOTS]@...", .others = "DeepSpeed --include"}},
      {"exclude",
       0,
       Arity::kValue,
       StringFlag(&Options::exclude),
       "DeepSpeed filter: leave out these hosts/slots",
       {.value = "HOST[:SLOTS]@...", .others = "DeepSpeed --exclude"}},
      {"remote",
       0,
       Arity::kValue,
       SetRemote,
       "head-node launch: start agents with ssh (default) or pdsh",
       {.value = "ssh|pdsh", .choices = "ssh pdsh", .others = "mpirun --mca plm_rsh_agent"}},
      {"ssh-port",
       0,
       Arity::kValue,
       SetSshPort,
       "head-node launch: ssh port",
       {.value = "PORT", .others = "mpirun --mca plm_rsh_args '-p PORT'"}},
      {"ssh-identity",
       0,
       Arity::kValue,
       StringFlag(&Options::ssh_identity),
       "head-node launch: ssh key file",
       {.value = "KEY", .kind = ValueKind::kFile, .others = "mpirun --mca plm_rsh_args '-i KEY'"}},
      {"ssh-option",
       0,
       Arity::kValue,
       SetSshOption,
       "head-node launch: ssh -o KEY=VALUE (repeatable)",
       {.value = "KEY=VALUE", .others = "mpirun --mca plm_rsh_args '-o KEY=VALUE'"}},
      {"export",
       'x',
       Arity::kValue,
       SetExport,
       "head-node launch: pass NAME[=VALUE] to every node (repeatable)",
       {.value = "NAME[=VALUE]", .others = "mpirun -x"}},
      {"remote-dlaunch",
       0,
       Arity::kValue,
       StringFlag(&Options::remote_dlaunch),
       "head-node launch: dlaunch's path on the nodes",
       {.value = "PATH", .kind = ValueKind::kFile}},
      {"launch-mode",
       0,
       Arity::kValue,
       SetLaunchMode,
       "per-process (default) or per-node: run COMMAND once per node",
       {.value = "MODE", .choices = "per-process per-node", .others = "mpirun --map-by ppr:1:node (per-node)"}},
      {"explain",
       0,
       Arity::kSwitch,
       SwitchFlag(&Options::explain),
       "print what was detected and the layout; launch nothing",
       {.others = "mpirun --display-map"}},
      {"standalone",
       0,
       Arity::kSwitch,
       SwitchFlag(&Options::standalone),
       "single node, local rendezvous",
       {.torchrun = true}},
      {"max-restarts",
       0,
       Arity::kValue,
       IntFlag("max-restarts", 0, &Options::max_restarts),
       "restarts of the worker group on failure (default 0)",
       {.value = "N", .torchrun = true}},
      {"max-no-progress-restarts",
       0,
       Arity::kValue,
       [](Options&, const std::string& v) { return ParseMaxNoProgressRestarts(v).status(); },
       "stop after K restarts in a row without progress (DLAUNCH_PROGRESS_FILE); exit 123: do not requeue",
       {.value = "K"}},
      {"restart-backoff",
       0,
       Arity::kValue,
       [](Options&, const std::string& v) { return ParseRestartBackoff(v).status(); },
       "wait MIN seconds before a restart, doubling up to MAX; reset after 10 minutes running",
       {.value = "MIN:MAX"}},
      {"role-restarts",
       0,
       Arity::kValue,
       [](Options&, const std::string& v) { return ParseRoleRestarts(v).status(); },
       "when a worker of role ROLE fails, restart only that role's workers, at most N times; the other roles run on "
       "(repeatable)",
       {.value = "ROLE=N"}},
      {"spares",
       0,
       Arity::kValue,
       [](Options&, const std::string& v) { return ParseSpares(v).status(); },
       "agents beyond --nnodes's maximum wait as spares and replace a lost node (default 0: a fixed-size job refuses "
       "them)",
       {.value = "N"}},
      {"monitor-interval",
       0,
       Arity::kValue,
       Ignore,
       "accepted; dlaunch reacts to exits at once",
       {.value = "SECONDS", .torchrun = true}},
      {"start-method",
       0,
       Arity::kValue,
       Ignore,
       "accepted; workers are always exec'd",
       {.value = "METHOD", .choices = "spawn fork forkserver", .torchrun = true}},
      {"role",
       0,
       Arity::kValue,
       StringFlag(&Options::role),
       "ROLE_NAME of the workers (default 'default')",
       {.value = "NAME", .torchrun = true}},
      {"module",
       'm',
       Arity::kSwitch,
       SwitchFlag(&Options::module),
       "run the script as a Python module",
       {.torchrun = true}},
      {"no-python", 0, Arity::kSwitch, SwitchFlag(&Options::no_python), "run the command as given", {.torchrun = true}},
      {"run-path",
       0,
       Arity::kSwitch,
       SwitchFlag(&Options::run_path),
       "run the script with runpy.run_path",
       {.torchrun = true}},
      {"log-dir",
       0,
       Arity::kValue,
       StringFlag(&Options::log_dir),
       "write each rank's output under DIR",
       {.value = "DIR", .kind = ValueKind::kDirectory, .torchrun = true, .others = "mpirun --output-filename DIR"}},
      {"logs-specs",
       0,
       Arity::kValue,
       RefuseLogsSpecs,
       "refused: torchrun's Python LogsSpecs plug-in (use --log-dir, --redirects, --tee)",
       {.value = "NAME", .torchrun = true}},
      {"events",
       0,
       Arity::kValue,
       StringFlag(&Options::events),
       "append the job's events to FILE, one JSON object per line",
       {.value = "FILE", .kind = ValueKind::kFile}},
      {"metrics-addr",
       0,
       Arity::kValue,
       StringFlag(&Options::metrics_addr),
       "serve /metrics, /healthz, /readyz on HOST:PORT (PORT alone: loopback; 0: any; or DLAUNCH_METRICS_ADDR)",
       {.value = "HOST:PORT", .others = "torchrun TORCHELASTIC_HEALTH_CHECK_PORT"}},
      {"redirects",
       'r',
       Arity::kValue,
       StdFlag("redirects", &Options::redirects),
       "streams to the log files only: 0-3 or 0:1,1:2",
       {.value = "STD", .choices = "0 1 2 3", .torchrun = true}},
      {"tee",
       't',
       Arity::kValue,
       StdFlag("tee", &Options::tee),
       "streams to console and log files: 0-3 or 0:1,1:2",
       {.value = "STD", .choices = "0 1 2 3", .torchrun = true}},
      {"local-ranks-filter",
       0,
       Arity::kValue,
       SetLocalRanksFilter,
       "show only these local ranks on the console",
       {.value = "RANKS", .torchrun = true}},
      {"shutdown-timeout",
       0,
       Arity::kValue,
       SetShutdownTimeout,
       "seconds from SIGTERM to SIGKILL (default 30)",
       {.value = "SECONDS", .torchrun = true}},
      {"hang-timeout",
       0,
       Arity::kValue,
       SetHangTimeout,
       "no rank writes a line this long: print every rank's stack (default 1800; 0: off)",
       {.value = "SECONDS"}},
      {"hang-action",
       0,
       Arity::kValue,
       SetHangAction,
       "after a hang's stacks: report (default; the job runs on) or stop (exit 124)",
       {.value = "ACTION", .choices = "report stop"}},
      {"straggler-window",
       0,
       Arity::kValue,
       [](Options&, const std::string& v) { return CheckStragglerWindow(v); },
       "compare where each rank spends its time this often, and name the one the others wait for (default 60; 0: "
       "off)",
       {.value = "SECONDS", .others = "NVIDIA's straggler detector (nvidia-resiliency-ext), with no script change"}},
      {"straggler-action",
       0,
       Arity::kValue,
       [](Options&, const std::string& v) { return CheckStragglerAction(v); },
       "once a straggler is named: report (default; the job runs on) or stop (exit 122)",
       {.value = "ACTION", .choices = "report stop"}},
      {"straggler-ignore",
       0,
       Arity::kValue,
       [](Options&, const std::string& v) { return CheckStragglerIgnore(v); },
       "time in FRAME (a function, a file, or FILE:LINE) holds no one back; repeatable",
       {.value = "FRAME"}},
      {"straggler-threshold",
       0,
       Arity::kValue,
       [](Options&, const std::string& v) { return CheckStragglerThreshold(v); },
       "name a rank only when the others lose this share of their time waiting for it (default 10)",
       {.value = "PERCENT"}},
      {"straggler-native", 0, Arity::kSwitch, [](Options&, const std::string&) { return Status::Ok(); },
       "also compare ranks that are not Python, from /proc (running or sleeping, and where)"},
      {"straggler-file",
       0,
       Arity::kValue,
       [](Options&, const std::string& v) { return CheckStragglerFile(v); },
       "--straggler-action stop writes the slow node's host name here, for a requeue that leaves it out",
       {.value = "PATH"}},
      {"health-check",
       0,
       Arity::kValue,
       [](Options&, const std::string& v) { return CheckHealthCommand(v); },
       "rendezvous node: run CMD (sh -c) before joining; a node whose check fails is held out",
       {.value = "CMD", .others = "Slurm HealthCheckProgram; ft_launcher's node health check"}},
      {"health-check-timeout",
       0,
       Arity::kValue,
       [](Options&, const std::string& v) { return CheckHealthSeconds("health-check-timeout", v); },
       "a health check running this long is killed and fails (default 60)",
       {.value = "S"}},
      {"health-check-interval",
       0,
       Arity::kValue,
       [](Options&, const std::string& v) { return CheckHealthSeconds("health-check-interval", v); },
       "a held-out or waiting node checks again this often; a restart rechecks an older pass (default 300)",
       {.value = "S"}},
      {"no-python-hook", 0, Arity::kSwitch, SwitchFlag(&Options::no_python_hook),
       "do not put the stack hook (a sitecustomize.py) on the workers' PYTHONPATH"},
      {"signals-to-handle",
       0,
       Arity::kValue,
       SetSignals,
       "signals that stop the job (default SIGTERM,SIGINT,SIGHUP,SIGQUIT)",
       {.value = "SIGNALS", .choices = "SIGTERM SIGINT SIGHUP SIGQUIT SIGUSR1 SIGUSR2", .torchrun = true}},
      {"legacy-launch",
       0,
       Arity::kSwitch,
       SwitchFlag(&Options::legacy_launch),
       "behave as python -m torch.distributed.launch",
       {.others = "python -m torch.distributed.launch"}},
      {"use-env",
       0,
       Arity::kSwitch,
       SwitchFlag(&Options::use_env),
       "legacy: do not append --local-rank",
       {.others = "torch.distributed.launch --use_env"}},
      {"local-rank-underscore",
       0,
       Arity::kSwitch,
       SwitchFlag(&Options::local_rank_underscore),
       "legacy: append --local_rank=N (PyTorch 1.x)",
       {.others = "torch.distributed.launch (PyTorch 1.x) passes --local_rank=N"}},
      {"env",
       0,
       Arity::kValue,
       SetEnvFlavor,
       "extra variable dialects: ompi, azure, horovod, tf (TF_CONFIG from groups named chief, worker, ps, evaluator)",
       {.value = "DIALECTS", .choices = "ompi azure horovod tf"}},
      {"roles",
       0,
       Arity::kValue,
       SetRoles,
       "TF roles, e.g. chief:1,worker:2,ps:1 (sets TF_CONFIG)",
       {.value = "ROLE:N,..."}},
      {"role-env",
       0,
       Arity::kValue,
       AddRoleEnv,
       "ROLE:NAME=VALUE for one role only (repeatable)",
       {.value = "ROLE:NAME=VALUE"}},
      {"multi-prog",
       0,
       Arity::kValue,
       [](Options&, const std::string& v) { return CheckMultiProg(v); },
       "srun's --multi-prog file: RANKS PROGRAM ARGS per line (%t rank, %o offset); no command",
       {.value = "FILE", .kind = ValueKind::kFile, .others = "srun --multi-prog"}},
      {"gpus",
       0,
       Arity::kValue,
       [](Options&, const std::string& v) { return CheckGpuList(v); },
       "this group's GPUs: its workers on a node take them in turn (CUDA_VISIBLE_DEVICES)",
       {.value = "ID,...", .others = "mpirun -x CUDA_VISIBLE_DEVICES per app context"}},
      {"tag-output",
       0,
       Arity::kOptionalValue,
       [](Options& o, const std::string& v) {
         o.tag_format = v.empty() ? "[{node_rank},{rank}]<{stream}>: " : v;
         return Status::Ok();
       },
       "tag lines; =FMT with {rank} {local_rank} {node_rank} {host} {role} {time} {stream}",
       {.value = "FMT", .others = "mpirun --tag-output, --timestamp-output"}},
      {"no-tag", 0, Arity::kSwitch, SwitchFlag(&Options::no_tag), "do not tag output lines"},
      {"bind-to",
       0,
       Arity::kValue,
       SetBindTo,
       "CPU binding per local rank: none, core or numa",
       {.value = "none|core|numa", .choices = "none core numa", .others = "mpirun --bind-to"}},
      {"pin-gpu", 0, Arity::kSwitch, SwitchFlag(&Options::pin_gpu), "CUDA_VISIBLE_DEVICES = this rank's GPU"},
      {"virtual-local-rank",
       0,
       Arity::kSwitch,
       SwitchFlag(&Options::virtual_local_rank),
       "LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES = this worker's GPU only",
       {.torchrun = true}},
      {"help", 'h', Arity::kSwitch, SwitchFlag(&Options::help), "show this help"},
      {"version", 'V', Arity::kSwitch, SwitchFlag(&Options::version), "show the version"},
  };
  return flags;
}

const Flag* FindFlag(std::string_view name) {
  for (const Flag& f : Flags())
    if (name == f.name) return &f;
  return nullptr;
}

const Flag* FindShort(char c) {
  for (const Flag& f : Flags())
    if (f.short_name != 0 && f.short_name == c) return &f;
  return nullptr;
}

std::string FlagSynopsis(const Flag& f) {
  std::string out = fmt::format("--{}", f.name);
  if (f.arity == Arity::kValue) out += fmt::format(" {}", f.doc.value);
  if (f.arity == Arity::kOptionalValue) out += fmt::format("[={}]", f.doc.value);
  return out;
}

}  // namespace dlaunch::launcher
