// A job spec read with yaml-cpp (job_spec.hpp). Over 400 lines, on purpose:
// the Reader (every field's check, naming its YAML path and line) and the
// readers of the spec's sections use one another and nothing else, and a header
// between them would only export what this file alone calls.
#include "launcher/config/job_spec.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <initializer_list>
#include <limits>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "base/defaults.hpp"
#include "launcher/config/hostfile.hpp"
#include "launcher/config/yaml_load.hpp"
#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

namespace {

using base::kMaxJobInstances;
// The most bytes of a key, value or --set an error quotes: a 40 KB argument
// still gets a one-line message.
constexpr size_t kMaxQuoted = 64;

std::string Quote(std::string_view s) { return PrintablePrefix(s, kMaxQuoted); }

// A process's command line and environment are C strings: a NUL would cut the
// text short without a word (the shell then sees half a command).
// The most --set a job takes; each one walks the spec's keys.
constexpr size_t kMaxSets = 1000;

constexpr std::string_view kNul{"\0", 1};

// The nodes one --set put into the spec (the keys and maps it made, the value
// and everything inside it), so that an error about one of them names the
// --set rather than a line of the file.
struct SetOrigin {
  std::string text;  // "a.b.c=value"
  std::vector<YAML::Node> nodes;
};

// Errors carry the file and the line of the node they are about, or the --set
// that put it there.
class Reader {
 public:
  Reader(std::string file, std::vector<SetOrigin> sets) : file_(std::move(file)), sets_(std::move(sets)) {}

  // Where `at` came from: "FILE:LINE", "--set a.b=v", or "FILE" when neither is known.
  std::string Where(const YAML::Node& at) const {
    if (!at.IsDefined()) return file_;
    for (const SetOrigin& set : sets_)
      for (const YAML::Node& n : set.nodes)
        if (n.is(at)) return fmt::format("--set {}", Quote(set.text));
    return at.Mark().line >= 0 ? fmt::format("{}:{}", file_, at.Mark().line + 1) : file_;
  }

  Status Error(const YAML::Node& at, const std::string& message) const {
    return Status::InvalidArgument(fmt::format("{}: {}", Where(at), message));
  }
  int Line(const YAML::Node& at) const { return at.Mark().line + 1; }

  // `node` must be a map whose keys are among `known`; `path` names it ("distributed.mpi").
  Status Keys(const YAML::Node& node, const std::string& path, std::initializer_list<std::string_view> known) const {
    if (!node.IsMap()) return Error(node, fmt::format("{}: expected a mapping", path.empty() ? "the spec" : path));
    for (const auto& kv : node) {
      std::string key = kv.first.Scalar();
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      std::string_view best;
      size_t best_d = 3;
      for (std::string_view k : known) {
        size_t d = EditDistance(key, k);
        if (d < best_d) {
          best_d = d;
          best = k;
        }
      }
      std::string where = path.empty() ? key : path + "." + key;
      return Error(kv.first, best.empty()
                                 ? fmt::format("unknown key '{}'", Quote(where))
                                 : fmt::format("unknown key '{}' (did you mean '{}'?)", Quote(where),
                                               path.empty() ? std::string(best) : path + "." + std::string(best)));
    }
    return Status::Ok();
  }

  Result<int> Count(const YAML::Node& node, const std::string& path, int min) const {
    if (!node.IsScalar()) return Error(node, fmt::format("{}: expected a number", path));
    std::optional<int> n = ParseInt(node.Scalar());
    if (!n || *n < min || *n > kMaxJobInstances)
      return Error(node, fmt::format("{}: expected a number from {} to {}, got '{}'", path, min, kMaxJobInstances,
                                     Quote(node.Scalar())));
    return *n;
  }

  Result<std::string> Text(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) return Error(node, fmt::format("{}: expected text", path));
    if (node.Scalar().find(kNul) != std::string::npos)
      return Error(node, fmt::format("{}: contains a NUL byte, which no command or path can hold", path));
    return node.Scalar();
  }

  Result<envmap::EnvVars> Variables(const YAML::Node& node, const std::string& path) const {
    if (!node.IsMap()) return Error(node, fmt::format("{}: expected NAME: value pairs", path));
    envmap::EnvVars vars;
    for (const auto& kv : node) {
      std::string name = kv.first.Scalar();
      if (name.empty() || name.find('=') != std::string::npos || !kv.second.IsScalar())
        return Error(kv.first, fmt::format("{}: expected NAME: value pairs, got '{}'", path, Quote(name)));
      if (name.find(kNul) != std::string::npos || kv.second.Scalar().find(kNul) != std::string::npos)
        return Error(kv.second, fmt::format("{}.{}: contains a NUL byte, which no environment variable can hold", path,
                                            Quote(name)));
      vars.emplace_back(name, kv.second.Scalar());
    }
    return vars;
  }

  // A field the platform acts on and dlaunch cannot: noted once, at its key's line.
  void NotApplied(const YAML::Node& map, const std::string& key, const std::string& path, JobSpec& spec) const {
    int line = Line(map[key]);
    for (const auto& kv : map)
      if (kv.first.Scalar() == key) line = Line(kv.first);
    spec.not_applied.push_back(fmt::format("{} (line {})", path, line));
  }

 private:
  std::string file_;
  std::vector<SetOrigin> sets_;
};

// Adds `node` and everything inside it to `out`.
void CollectNodes(const YAML::Node& node, std::vector<YAML::Node>& out) {
  out.push_back(node);
  if (node.IsMap()) {
    for (const auto& kv : node) {
      CollectNodes(kv.first, out);
      CollectNodes(kv.second, out);
    }
  } else if (node.IsSequence()) {
    for (const YAML::Node& item : node) CollectNodes(item, out);
  }
}

// The key node of `key` in `map` (for SetOrigin).
void CollectKey(const YAML::Node& map, const std::string& key, std::vector<YAML::Node>& out) {
  for (const auto& kv : map)
    if (kv.first.IsScalar() && kv.first.Scalar() == key) out.push_back(kv.first);
}

// --set a.b.c=value: the value is read as YAML, so numbers stay numbers. The
// nodes it puts in go to `made`.
Status ApplySet(YAML::Node& root, const std::string& set, SetOrigin& made) {
  made.text = set;
  size_t eq = set.find('=');
  if (eq == std::string::npos || eq == 0)
    return Status::InvalidArgument(fmt::format("--set: expected KEY.PATH=VALUE, got '{}'", Quote(set)));
  std::vector<std::string> path = Split(std::string_view(set).substr(0, eq), '.');
  if (path.size() > static_cast<size_t>(kMaxYamlDepth))
    return Status::InvalidArgument(
        fmt::format("--set {}: a key path of {} levels, over the limit of {}", Quote(set), path.size(), kMaxYamlDepth));
  Result<YAML::Node> loaded = LoadYaml(std::string_view(set).substr(eq + 1), "--set " + Quote(set), false);
  if (!loaded.ok()) return loaded.status();
  YAML::Node value = *loaded;
  // Walk down, making maps where there are none (yaml-cpp nodes are handles).
  std::vector<YAML::Node> chain = {root};
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    if (path[i].empty()) return Status::InvalidArgument(fmt::format("--set: empty key in '{}'", Quote(set)));
    YAML::Node next = chain.back()[path[i]];
    if (!next.IsDefined() || next.IsNull()) {
      bool is_new = !next.IsDefined();
      chain.back()[path[i]] = YAML::Node(YAML::NodeType::Map);
      next = chain.back()[path[i]];
      if (is_new) CollectKey(chain.back(), path[i], made.nodes);
      made.nodes.push_back(next);
    }
    if (!next.IsMap())
      return Status::InvalidArgument(fmt::format("--set {}: '{}' is not a mapping", Quote(set), Quote(path[i])));
    chain.push_back(next);
  }
  if (path.back().empty()) return Status::InvalidArgument(fmt::format("--set: empty key in '{}'", Quote(set)));
  bool is_new = !chain.back()[path.back()].IsDefined();
  chain.back()[path.back()] = value;
  if (is_new) CollectKey(chain.back(), path.back(), made.nodes);
  CollectNodes(chain.back()[path.back()], made.nodes);
  return Status::Ok();
}

// TF's role names for the spec's.
std::string TfRole(const std::string& spec_name) { return spec_name == "parameter_server" ? "ps" : spec_name; }

Status ReadDistributed(const Reader& r, const YAML::Node& d, JobSpec& spec) {
  if (Status s = r.Keys(d, "distributed", {"mpi", "pytorch", "tensorflow"}); !s.ok()) return s;
  if (d.size() != 1) return r.Error(d, "distributed: expected one of mpi, pytorch or tensorflow");
  const std::string kind = d.begin()->first.Scalar();
  const YAML::Node body = d.begin()->second;
  if (kind == "mpi" || kind == "pytorch") {
    std::string path = "distributed." + kind;
    spec.kind = kind == "mpi" ? JobKind::kMpi : JobKind::kPyTorch;
    if (kind == "mpi") {
      if (Status s = r.Keys(body, path, {"worker", "launcher"}); !s.ok()) return s;
      if (body["launcher"]) r.NotApplied(body, "launcher", path + ".launcher", spec);
    } else if (Status s = r.Keys(body, path, {"worker"}); !s.ok()) {
      return s;
    }
    YAML::Node worker = body["worker"];
    if (!worker) return r.Error(body, path + ": needs worker: {count: N}");
    if (Status s = r.Keys(worker, path + ".worker", {"count", "slots_per", "resources", "resource_limits"}); !s.ok())
      return s;
    if (!worker["count"]) return r.Error(worker, path + ".worker.count: missing");
    Result<int> count = r.Count(worker["count"], path + ".worker.count", 1);
    if (!count.ok()) return count.status();
    spec.instances = *count;
    spec.instances_at = r.Where(worker["count"]);
    if (worker["slots_per"]) {
      Result<int> slots = r.Count(worker["slots_per"], path + ".worker.slots_per", 1);
      if (!slots.ok()) return slots.status();
      spec.processes = *slots;
    }
    for (const char* k : {"resources", "resource_limits"})
      if (worker[k]) r.NotApplied(worker, k, path + ".worker." + k, spec);
    return Status::Ok();
  }
  spec.kind = JobKind::kTensorFlow;
  spec.instances_at = r.Where(d.begin()->first);
  if (Status s = r.Keys(body, "distributed.tensorflow", {"chief", "worker", "parameter_server", "evaluator"}); !s.ok())
    return s;
  spec.instances = 0;
  for (const char* role : {"chief", "worker", "parameter_server", "evaluator"}) {
    YAML::Node node = body[role];
    if (!node) continue;
    std::string path = fmt::format("distributed.tensorflow.{}", role);
    if (Status s =
            r.Keys(node, path, {"count", "environment_variables", "environment", "resource_limits", "resources"});
        !s.ok())
      return s;
    if (!node["count"]) return r.Error(node, path + ".count: missing");
    Result<int> count = r.Count(node["count"], path + ".count", 1);
    if (!count.ok()) return count.status();
    envmap::RoleSpec spec_role{TfRole(role), *count, {}};
    if (node["environment_variables"]) {
      Result<envmap::EnvVars> vars = r.Variables(node["environment_variables"], path + ".environment_variables");
      if (!vars.ok()) return vars.status();
      spec_role.env = *vars;
    }
    for (const char* k : {"environment", "resource_limits", "resources"})
      if (node[k]) r.NotApplied(node, k, path + "." + k, spec);
    spec.instances += *count;
    spec.roles.push_back(std::move(spec_role));
  }
  if (spec.roles.empty())
    return r.Error(body, "distributed.tensorflow: needs a worker, chief or parameter_server count");
  if (spec.instances > kMaxJobInstances)
    return r.Error(body, fmt::format("distributed.tensorflow: {} tasks in all, over the limit of {}", spec.instances,
                                     kMaxJobInstances));
  return Status::Ok();
}

// `instances`: the count from compute/resources, if any (`spec.instances_at`
// already names it).
Status ReadDistribution(const Reader& r, const YAML::Node& d, std::optional<int> instances, JobSpec& spec) {
  if (Status s = r.Keys(
          d, "distribution",
          {"type", "process_count_per_instance", "process_count_per_node", "worker_count", "parameter_server_count"});
      !s.ok())
    return s;
  if (!d["type"]) return r.Error(d, "distribution.type: missing (mpi, pytorch or tensorflow)");
  Result<std::string> type = r.Text(d["type"], "distribution.type");
  if (!type.ok()) return type.status();
  std::string t = *type;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (t != "mpi" && t != "pytorch" && t != "tensorflow")
    return r.Error(d["type"],
                   fmt::format("distribution.type: expected mpi, pytorch or tensorflow, got '{}'", Quote(*type)));
  spec.kind = t == "mpi" ? JobKind::kMpi : t == "pytorch" ? JobKind::kPyTorch : JobKind::kTensorFlow;
  spec.instances = instances.value_or(1);
  if (!instances) spec.instances_at = r.Where(d);
  for (const char* k : {"process_count_per_instance", "process_count_per_node"}) {
    if (!d[k]) continue;
    if (spec.kind == JobKind::kTensorFlow)
      return r.Error(d[k], fmt::format("distribution.{}: not for tensorflow (one task per instance)", k));
    Result<int> n = r.Count(d[k], fmt::format("distribution.{}", k), 1);
    if (!n.ok()) return n.status();
    spec.processes = *n;
  }
  if (spec.kind != JobKind::kTensorFlow) {
    for (const char* k : {"worker_count", "parameter_server_count"})
      if (d[k]) return r.Error(d[k], fmt::format("distribution.{}: only for tensorflow", k));
    return Status::Ok();
  }
  int workers = spec.instances, ps = 0;
  if (d["worker_count"]) {
    Result<int> n = r.Count(d["worker_count"], "distribution.worker_count", 1);
    if (!n.ok()) return n.status();
    workers = *n;
  }
  if (d["parameter_server_count"]) {
    Result<int> n = r.Count(d["parameter_server_count"], "distribution.parameter_server_count", 0);
    if (!n.ok()) return n.status();
    ps = *n;
  }
  if (instances && *instances != workers + ps)
    return r.Error(d, fmt::format("distribution: {} worker(s) and {} parameter server(s) make {} tasks, one per "
                                  "instance, but the instance count is {}",
                                  workers, ps, workers + ps, *instances));
  spec.instances = workers + ps;
  if (!instances) spec.instances_at = r.Where(d["worker_count"] ? d["worker_count"] : d);
  spec.roles.push_back(envmap::RoleSpec{"worker", workers, {}});
  if (ps > 0) spec.roles.push_back(envmap::RoleSpec{"ps", ps, {}});
  return Status::Ok();
}

// compute: / resources: instance_count or node_count.
Result<std::optional<int>> InstanceCount(const Reader& r, const YAML::Node& root, JobSpec& spec) {
  std::optional<int> count;
  for (const char* section : {"compute", "resources"}) {
    YAML::Node s = root[section];
    if (!s) continue;
    if (Status st = r.Keys(s, section,
                           {"instance_count", "node_count", "instance_type", "target", "type", "infrastructure",
                            "locations", "shm_size"});
        !st.ok())
      return st;
    for (const auto& kv : s) {
      std::string key = kv.first.Scalar();
      std::string path = fmt::format("{}.{}", section, key);
      if (key == "instance_count" || key == "node_count") {
        Result<int> n = r.Count(kv.second, path, 1);
        if (!n.ok()) return n.status();
        if (count && *count != *n)
          return r.Error(kv.second,
                         fmt::format("{}: {} disagrees with the instance count {} given before", path, *n, *count));
        count = *n;
        spec.instances_at = r.Where(kv.second);
      } else {
        r.NotApplied(s, key, path, spec);
      }
    }
  }
  return count;
}

}  // namespace

bool JobSpec::CommandLaunchesMpi() const {
  if (kind != JobKind::kMpi) return false;
  size_t start = command.find_first_not_of(" \t\n");
  if (start == std::string::npos) return false;
  std::string first = command.substr(start, command.find_first_of(" \t\n", start) - start);
  first = first.substr(first.rfind('/') == std::string::npos ? 0 : first.rfind('/') + 1);
  return first == "mpirun" || first == "mpiexec" || first == "horovodrun";
}

int JobSpec::WorldSize() const { return kind == JobKind::kTensorFlow ? instances : instances * processes.value_or(1); }

namespace {

// code: PATH, or code: {path: PATH} (local_path, the older name): the
// directory the command runs in, relative to the spec's own.
Status ReadCode(const Reader& r, const YAML::Node& code, const std::string& file, JobSpec& spec) {
  if (code.IsScalar()) {
    Result<std::string> path = r.Text(code, "code");
    if (!path.ok()) return path.status();
    spec.code_dir = *path;
  } else {
    if (Status s = r.Keys(code, "code", {"path", "local_path"}); !s.ok()) return s;
    YAML::Node p = code["path"] ? code["path"] : code["local_path"];
    Result<std::string> path = p ? r.Text(p, "code.path") : Result<std::string>(std::string());
    if (!path.ok()) return path.status();
    spec.code_dir = *path;
  }
  if (!spec.code_dir.empty()) {
    std::filesystem::path base = std::filesystem::path(file).parent_path();
    spec.code_dir = (base / spec.code_dir).lexically_normal().string();
  }
  return Status::Ok();
}

}  // namespace

Result<JobSpec> ParseJobSpec(const std::string& text, const std::string& file, const std::vector<std::string>& sets) {
  Result<YAML::Node> loaded = LoadYaml(text, file, true);
  if (!loaded.ok()) return loaded.status();
  YAML::Node root = *loaded;
  if (!root.IsMap()) return Status::InvalidArgument(fmt::format("{}: expected a job spec (a YAML mapping)", file));
  if (sets.size() > kMaxSets)
    return Status::InvalidArgument(fmt::format("--set: {} given, over the limit of {}", sets.size(), kMaxSets));
  std::vector<SetOrigin> made(sets.size());
  for (size_t i = 0; i < sets.size(); ++i)
    if (Status s = ApplySet(root, sets[i], made[i]); !s.ok()) return s;
  // Each part was bounded alone; so is what they make together.
  if (!sets.empty())
    if (Status s = CheckYamlExpansion(root, file + " with its --set values"); !s.ok()) return s;
  Reader r(file, std::move(made));

  JobSpec spec;
  try {
    if (Status s = r.Keys(root, "",
                          {"$schema", "type", "name", "display_name", "experiment_name", "description", "tags",
                           "command", "code", "environment", "environment_variables", "distributed", "distribution",
                           "compute", "resources", "inputs", "outputs", "limits"});
        !s.ok())
      return s;
    if (!root["command"]) return Status::InvalidArgument(fmt::format("{}: command: missing", file));
    Result<std::string> command = r.Text(root["command"], "command");
    if (!command.ok()) return command.status();
    spec.command = *command;
    if (spec.command.find_first_not_of(" \t\n") == std::string::npos) return r.Error(root["command"], "command: empty");

    if (YAML::Node code = root["code"]) {
      if (Status st = ReadCode(r, code, file, spec); !st.ok()) return st;
    }
    if (YAML::Node env = root["environment_variables"]) {
      Result<envmap::EnvVars> vars = r.Variables(env, "environment_variables");
      if (!vars.ok()) return vars.status();
      spec.env = *vars;
    }
    for (const char* k : {"environment", "inputs", "outputs", "limits"})
      if (root[k]) r.NotApplied(root, k, k, spec);

    Result<std::optional<int>> instances = InstanceCount(r, root, spec);
    if (!instances.ok()) return instances.status();
    YAML::Node distributed = root["distributed"], distribution = root["distribution"];
    if (distributed && distribution)
      return r.Error(distribution, "distribution: give either distributed: or distribution:, not both");
    if (distributed) {
      if (Status s = ReadDistributed(r, distributed, spec); !s.ok()) return s;
      if (*instances && **instances != spec.instances && spec.kind != JobKind::kTensorFlow)
        return r.Error(distributed, fmt::format("distributed: worker count {} disagrees with the instance count {}",
                                                spec.instances, **instances));
    } else if (distribution) {
      if (Status s = ReadDistribution(r, distribution, *instances, spec); !s.ok()) return s;
    } else {
      return Status::InvalidArgument(
          fmt::format("{}: needs distributed: (mpi, pytorch or tensorflow) or distribution: (type: ...)", file));
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}:{}: {}", file, e.mark.line + 1, e.msg));
  }
  if (static_cast<int64_t>(spec.instances) * spec.processes.value_or(1) >
      kMaxWorkersPerNode * int64_t{kMaxJobInstances})
    return Status::InvalidArgument(
        fmt::format("{}: {} instances of {} processes are too many", file, spec.instances, spec.processes.value_or(1)));
  if (spec.processes && *spec.processes > kMaxWorkersPerNode)
    return Status::InvalidArgument(
        fmt::format("{}: {} processes per instance, over the limit of {}", file, *spec.processes, kMaxWorkersPerNode));
  return spec;
}

}  // namespace dlaunch::launcher
