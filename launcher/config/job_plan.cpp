#include "launcher/config/job_plan.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "launcher/config/cli.hpp"
#include "launcher/config/colon_groups.hpp"
#include "launcher/config/groups.hpp"
#include "launcher/config/hostfile.hpp"
#include "launcher/config/subcommands.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

namespace {

// Where the instances run when no node list is given: 127.0.0.1, 127.0.0.2, ...
std::string LoopbackHost(int i) { return fmt::format("127.0.{}.{}", i / 254, i % 254 + 1); }

// The flags the spec itself becomes: given again after the spec they would
// silently win over it (the last of a flag counts), so they are refused.
constexpr std::string_view kSpecFlags[] = {"--nproc-per-node", "--nnodes",      "--node-rank",   "--roles",
                                           "--role-env",       "--launch-mode", "--master-addr", "--master-port",
                                           "--rdzv-endpoint",  "--standalone"};

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

}  // namespace

std::string JobUsage() {
  return "usage: dlaunch job SPEC.yml [--set KEY.PATH=VALUE]... [-H HOSTS | --hostfile F] [--explain] [FLAGS]\n"
         "\n"
         "Runs a job spec (distributed: mpi / pytorch / tensorflow, or distribution: type: ...)\n"
         "on this machine, each instance a node on its own loopback address, or on the listed\n"
         "nodes in order. FLAGS are any dlaunch flags (--events, --hang-timeout, --tag-output, ...).\n\n" +
         ExampleLine("job");
}

namespace {

// The words after `dlaunch job`, sorted: the spec, its --set edits, the node
// list's flags, and every other flag, for Decide.
struct JobArgs {
  std::string file;
  std::vector<std::string> sets, node_flags, extra;
};

Result<JobArgs> SplitJobArgs(const std::vector<std::string>& args) {
  JobArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (out.file.empty() && !a.starts_with("-")) {
      out.file = a;
    } else if (a == "--set" || a.starts_with("--set=")) {
      if (a == "--set" && i + 1 >= args.size()) return Status::InvalidArgument("--set: expects KEY.PATH=VALUE");
      out.sets.push_back(a == "--set" ? args[++i] : a.substr(6));
    } else if (a == "-H" || a == "--host" || a == "--hostfile" || a == "--nodes") {
      if (i + 1 >= args.size()) return Status::InvalidArgument(fmt::format("{}: expects a value", a));
      out.node_flags.insert(out.node_flags.end(), {a, args[++i]});
    } else if (a.starts_with("-H") || a.starts_with("--host=") || a.starts_with("--hostfile=") ||
               a.starts_with("--nodes=")) {
      out.node_flags.push_back(a);
    } else {
      std::string name = a.substr(0, a.find('='));
      if (name.starts_with("--")) std::replace(name.begin() + 2, name.end(), '_', '-');
      for (std::string_view spec_flag : kSpecFlags)
        if (name == spec_flag)
          return Status::InvalidArgument(fmt::format(
              "{}: the job spec decides it (change the spec, or use --set KEY.PATH=VALUE)", a.substr(0, a.find('='))));
      out.extra.push_back(a);
    }
  }
  if (out.file.empty()) return Status::InvalidArgument("job: no spec file given (" + JobUsage().substr(7, 60) + "...)");
  return out;
}

// The nodes of the list given after the spec (-H, --hostfile), one for each
// of its instances; a list of another length is refused, naming the count's place.
Result<std::vector<HostEntry>> InstanceHosts(const JobSpec& s, const std::vector<std::string>& node_flags,
                                             const envmap::EnvMap& env) {
  std::vector<std::string> list = node_flags;
  list.insert(list.end(), {"--", "true"});
  Result<Options> o = ParseCommandLine(list, env);
  if (!o.ok()) return o.status();
  Result<std::vector<HostEntry>> hosts = NodeList(*o);
  if (!hosts.ok()) return hosts.status();
  if (static_cast<int>(hosts->size()) != s.instances)
    return Status::InvalidArgument(fmt::format("{}: the spec has {} instance(s) but the node list has {} node(s)",
                                               s.instances_at, s.instances, hosts->size()));
  return hosts;
}

// An MPI command across listed nodes runs once, on node 0, as on the platform:
// a head launch of node 0 alone. The nodes and their slots travel in
// DLAUNCH_JOB_HOSTS ("h1 slots=2,h2 slots=2"; a host name has no comma) and
// become a hostfile there, named by AZUREML_MPI_HOSTFILE and removed when the
// command ends. Sets the flags and returns the command that wraps the spec's.
Result<std::string> MpiOnNodeZero(const JobSpec& s, const std::vector<std::string>& node_flags, int per_instance,
                                  const envmap::EnvMap& env, std::vector<std::string>& f) {
  Result<std::vector<HostEntry>> hosts = InstanceHosts(s, node_flags, env);
  if (!hosts.ok()) return hosts.status();
  std::vector<std::string> slots;
  for (const HostEntry& h : *hosts) slots.push_back(fmt::format("{} slots={}", h.host, per_instance));
  const std::string& node0 = hosts->front().host;
  f = {"-H",
       fmt::format("{}:1", node0.find(':') == std::string::npos ? node0 : "[" + node0 + "]"),
       "--nproc-per-node",
       "1",
       "--no-tag",
       "-x",
       "DLAUNCH_JOB_HOSTS=" + Join(slots, ",")};
  for (const auto& [k, v] : s.env) f.insert(f.end(), {"-x", k + "=" + v});
  // mktemp: a name that `ps` shows must not be one another user can plant a
  // symbolic link at before the shell writes through it.
  return std::string(
      "f=$(mktemp \"${TMPDIR:-/tmp}/dlaunch-hosts-XXXXXX\") || exit 1; "
      "printf '%s\\n' \"$DLAUNCH_JOB_HOSTS\" | tr , '\\n' >\"$f\" || { rm -f \"$f\"; exit 1; }; "
      "unset DLAUNCH_JOB_HOSTS; AZUREML_MPI_HOSTFILE=$f; export AZUREML_MPI_HOSTFILE; /bin/sh -c \"$0\"; rc=$?; "
      "rm -f \"$f\"; exit $rc");
}

// The workers' command of a horovodrun command line (the seeds' MPI job:
// "horovodrun -np 16 --hostfile $AZUREML_MPI_HOSTFILE python train.py"): what
// follows horovodrun's flags. dlaunch takes horovodrun's place and serves its
// gloo store itself (--env horovod), so -np must agree with the spec, and -H and
// --hostfile, which name the service's machines, give way to dlaunch's node
// list. nullopt when the command is not horovodrun. The flags are split at
// white space (a quote there is refused): the program's own words are kept as
// written, for the shell.
Result<std::optional<std::string>> HorovodrunWorkers(const JobSpec& s, const std::string& file) {
  std::string_view c = s.command;
  size_t at = 0;
  auto next = [&c, &at]() {
    size_t start = c.find_first_not_of(" \t\n", at);
    if (start == std::string_view::npos) start = c.size();
    size_t end = std::min(c.find_first_of(" \t\n", start), c.size());
    at = end;
    return std::pair<size_t, std::string_view>(start, c.substr(start, end - start));
  };
  auto [first_at, first] = next();
  if (s.kind != JobKind::kMpi || first.substr(first.rfind('/') + 1) != "horovodrun")
    return std::optional<std::string>();
  auto bad = [&file](const std::string& why) {
    return Status::InvalidArgument(fmt::format("{}: command: {}", file, why));
  };
  std::optional<int> np;
  while (true) {
    auto [word_at, word] = next();
    if (word.empty()) return bad("horovodrun without a program to run");
    if (word.find_first_of("'\"\\") != std::string_view::npos)
      return bad(fmt::format("horovodrun's flags are read as plain words; '{}' has a quote", SafeUtf8(word, false)));
    if (word.front() != '-') {
      std::string_view rest = c.substr(word_at);
      rest = rest.substr(0, rest.find_last_not_of(" \t\n") + 1);
      if (np && *np != s.WorldSize())
        return bad(fmt::format("horovodrun -np {}, but the spec runs {} processes ({} instance{} of {})", *np,
                               s.WorldSize(), s.instances, s.instances == 1 ? "" : "s", s.processes.value_or(1)));
      return std::optional<std::string>(std::string(rest));
    }
    std::string_view name = word.substr(0, word.find('='));
    bool inline_value = name.size() < word.size();
    if (name == "--gloo" || name == "--verbose") continue;
    if (name != "-np" && name != "--num-proc" && name != "-H" && name != "--hosts" && name != "--hostfile" &&
        name != "-hostfile")
      return bad(
          fmt::format("horovodrun's {} is not one dlaunch reads (dlaunch runs the workers itself and "
                      "understands -np, -H, --hostfile, --gloo and --verbose): remove it",
                      SafeUtf8(name, false)));
    std::string_view value = inline_value ? word.substr(name.size() + 1) : next().second;
    if (value.empty()) return bad(fmt::format("horovodrun's {} expects a value", name));
    if (name == "-np" || name == "--num-proc") {
      int n = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || end != value.data() + value.size() || n < 1)
        return bad(fmt::format("horovodrun {} {}: expected a positive number", name, SafeUtf8(value, false)));
      np = n;
    }
  }
}

// Every other job: one agent per instance, on the listed nodes or on loopback
// addresses of this machine.
std::vector<std::string> FlagsPerInstance(const JobSpec& s, const std::vector<std::string>& node_flags,
                                          int per_instance) {
  std::vector<std::string> f = node_flags;
  if (node_flags.empty()) {
    std::vector<std::string> hosts;
    for (int i = 0; i < s.instances; ++i) hosts.push_back(fmt::format("{}:{}", LoopbackHost(i), per_instance));
    f = {"-H", Join(hosts, ",")};
  }
  f.insert(f.end(), {"--nproc-per-node", std::to_string(per_instance)});
  for (const auto& [k, v] : s.env) f.insert(f.end(), {"-x", k + "=" + v});
  if (s.kind == JobKind::kMpi) f.insert(f.end(), {"--env", "ompi,azure"});
  if (s.kind == JobKind::kPyTorch && !s.processes) {
    // A per-node launcher (torch.distributed.launch) in each instance, told
    // NODE_RANK, MASTER_ADDR and MASTER_PORT: 6105 unless the spec sets it.
    std::string port = "6105";
    for (const auto& [k, v] : s.env)
      if (k == "MASTER_PORT") port = v;
    f.insert(f.end(), {"--launch-mode", "per-node", "--master-port", port});
  }
  return f;
}

// TensorFlow: each task type a group of its own (colon_groups.hpp), on
// instances of its own, in the spec's order, with --env tf for TF_CONFIG: the
// same groups as `dlaunch --env tf -H h1 --role chief -- CMD : -H h2,h3 --role
// worker -- CMD`. A role's environment_variables are its group's -x, after the
// job's, so they win; a head sends them to its agents over stdin.
Result<std::vector<std::string>> TfGroupFlags(const JobSpec& s, const JobArgs& args, const std::string& command,
                                              const envmap::EnvMap& env) {
  std::vector<std::string> hosts;
  if (args.node_flags.empty()) {
    for (int i = 0; i < s.instances; ++i) hosts.push_back(LoopbackHost(i));
  } else {
    Result<std::vector<HostEntry>> entries = InstanceHosts(s, args.node_flags, env);
    if (!entries.ok()) return entries.status();
    for (const HostEntry& e : *entries) hosts.push_back(e.host);
  }
  std::vector<std::string> f;
  size_t next = 0;
  for (size_t r = 0; r < s.roles.size(); ++r) {
    const envmap::RoleSpec& role = s.roles[r];
    std::vector<std::string> mine;
    for (int i = 0; i < role.count; ++i) mine.push_back(hosts[next++] + ":1");
    if (r > 0) f.push_back(":");
    f.insert(f.end(), {"-H", Join(mine, ","), "--nproc-per-node", "1", "--role", role.name});
    if (r == 0) {
      f.insert(f.end(), {"--env", "tf"});
      f.insert(f.end(), args.extra.begin(), args.extra.end());
    }
    for (const auto& [k, v] : s.env) f.insert(f.end(), {"-x", k + "=" + v});
    for (const auto& [k, v] : role.env) f.insert(f.end(), {"-x", k + "=" + v});
    f.insert(f.end(), {"--", "/bin/sh", "-c", command});
  }
  return f;
}

}  // namespace

Result<JobPlan> DecideJob(const std::vector<std::string>& args, envmap::EnvMap env, const MachineFacts& facts) {
  Result<JobArgs> split = SplitJobArgs(args);
  if (!split.ok()) return split.status();
  JobPlan job;
  job.file = split->file;
  bool node_list = !split->node_flags.empty();
  Result<std::string> text = ReadHostfile(job.file, "job spec");  // a bounded read of a regular file, naming it
  if (!text.ok()) return text.status();
  Result<JobSpec> spec = ParseJobSpec(*text, job.file, split->sets);
  if (!spec.ok()) return spec.status();
  job.spec = *spec;
  const JobSpec& s = job.spec;

  std::vector<std::string>& f = job.flags;
  int per_instance = s.kind == JobKind::kTensorFlow ? 1 : s.processes.value_or(1);
  Result<std::optional<std::string>> horovod = HorovodrunWorkers(s, job.file);
  if (!horovod.ok()) return horovod.status();
  bool mpi_command = s.CommandLaunchesMpi() && !*horovod;
  const bool tf_groups = s.kind == JobKind::kTensorFlow && !s.roles.empty();
  std::string command = s.command;
  if (*horovod) {
    // horovodrun's place: every instance runs its workers, and node rank 0 serves the store.
    f = FlagsPerInstance(s, split->node_flags, per_instance);
    std::replace(f.begin(), f.end(), std::string("ompi,azure"), std::string("horovod"));
    command = **horovod;
  } else if (mpi_command && !node_list) {
    // The command fans out itself: once, here, with this machine's slots in a hostfile.
    f = {"--nproc-per-node", "1", "--no-tag"};
    // Its path is not known yet: RunJob makes the file (an unpredictable name,
    // created exclusively) and tells the command, unless the spec names one.
    job.hostfile_dir = env.contains("TMPDIR") && !env["TMPDIR"].empty() ? env["TMPDIR"] : "/tmp";
    job.hostfile = fmt::format("localhost slots={}\n", s.instances * per_instance);
    env.erase("AZUREML_MPI_HOSTFILE");
    for (const auto& [k, v] : s.env) env[k] = v;
  } else if (mpi_command) {
    Result<std::string> wrapped = MpiOnNodeZero(s, split->node_flags, per_instance, env, f);
    if (!wrapped.ok()) return wrapped.status();
    command = *wrapped;
  } else if (tf_groups) {
    Result<std::vector<std::string>> groups = TfGroupFlags(s, *split, command, env);
    if (!groups.ok()) return groups.status();
    f = std::move(*groups);
  } else {
    f = FlagsPerInstance(s, split->node_flags, per_instance);
  }
  if (!tf_groups) {  // the groups hold their commands already
    f.insert(f.end(), split->extra.begin(), split->extra.end());
    f.insert(f.end(), {"--", "/bin/sh", "-c", command});
  }
  if (mpi_command && command != s.command) f.push_back(s.command);  // $0 of the wrapper on node 0

  Result<JobLine> line = ParseJobLine(f, env);
  if (!line.ok()) return line.status();
  Result<Plan> plan = Decide(line->options, envmap::Detected{}, facts, env);
  if (plan.ok()) plan = WithPrograms(std::move(*plan), line->programs);
  if (!plan.ok()) return plan.status();
  job.plan = std::move(*plan);
  if (!mpi_command || node_list) {
    const auto* head = std::get_if<HeadPlan>(&job.plan.run);
    if (head == nullptr)
      return Status::InvalidArgument(
          fmt::format("{}: the instances need a node list (-H, --hostfile) or none", job.file));
    int listed = static_cast<int>(head->hosts.size());
    if (listed != (mpi_command ? 1 : s.instances))
      return Status::InvalidArgument(fmt::format("{}: the spec has {} instance(s) but the node list has {} node(s)",
                                                 s.instances_at, s.instances, listed));
  }
  return job;
}

}  // namespace dlaunch::launcher
