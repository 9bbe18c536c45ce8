#include "envmap/detect.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>

#include <boost/json.hpp>
#include <fmt/format.h>

namespace dlaunch::envmap {

std::string Shown(std::string_view value) {
  constexpr size_t kShown = 200;
  std::string out;
  for (char c : value.substr(0, kShown)) {
    auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f)
      out += c;
    else
      out += fmt::format("\\x{:02x}", byte);
  }
  return value.size() > kShown ? out + "..." : out;
}

namespace {

const std::string* Get(const EnvMap& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// Node and task counts become per-node tables downstream: bound them.
constexpr int kMaxCount = static_cast<int>(kMaxHosts);

// The variable as a number from `min` to `max`, nullopt when absent; an error
// when malformed.
Result<std::optional<int>> Int(const EnvMap& env, const char* name, int min = 0,
                               int max = std::numeric_limits<int>::max()) {
  const std::string* v = Get(env, name);
  if (v == nullptr) return std::optional<int>();
  int n = 0;
  auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (v->empty() || ec != std::errc() || ptr != v->data() + v->size() || n < min || n > max)
    return Status::InvalidArgument(
        max == std::numeric_limits<int>::max()
            ? fmt::format("{}: expected a number >= {}, got '{}'", name, min, Shown(*v))
            : fmt::format("{}: expected a number from {} to {}, got '{}'", name, min, max, Shown(*v)));
  return std::optional<int>(n);
}

// Reads a required-or-optional number into `out`, noting where it came from.
#define DLAUNCH_READ(var, name, ...)          \
  auto var##_r = Int(env, name, __VA_ARGS__); \
  if (!var##_r.ok()) return var##_r.status(); \
  std::optional<int> var = *var##_r

// "addr:port" (the port optional) into the master fields.
Status SetMaster(Detected& d, const std::string& name, const std::string& value) {
  size_t colon = value.rfind(':');
  if (colon == std::string::npos || value.find(':') != colon) {
    d.master_addr = value;
    return Status::Ok();
  }
  int port = 0;
  std::string_view p = std::string_view(value).substr(colon + 1);
  auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  if (p.empty() || ec != std::errc() || ptr != p.data() + p.size() || port < 1 || port > 65535)
    return Status::InvalidArgument(fmt::format("{}: expected ADDR:PORT, got '{}'", name, value));
  d.master_addr = value.substr(0, colon);
  d.master_port = port;
  return Status::Ok();
}

Result<Detected> Kubeflow(const EnvMap& env) {
  Detected d;
  d.source = Source::kKubeflow;
  if (const std::string* nnodes = Get(env, "PET_NNODES")) {
    // "N" or "MIN:MAX": the node count is the maximum.
    size_t colon = nnodes->find(':');
    EnvMap max = {{"PET_NNODES", colon == std::string::npos ? *nnodes : nnodes->substr(colon + 1)}};
    auto n = Int(max, "PET_NNODES", 1, kMaxCount);
    if (!n.ok() || !*n)
      return Status::InvalidArgument(fmt::format("PET_NNODES: expected N or MIN:MAX, got '{}'", *nnodes));
    d.nnodes = **n;
    d.evidence.push_back(fmt::format("{} nodes from PET_NNODES={}", d.nnodes, *nnodes));
  }
  DLAUNCH_READ(node_rank, "PET_NODE_RANK", 0);
  if (node_rank) {
    d.node_rank = *node_rank;
    d.evidence.push_back(fmt::format("node rank {} from PET_NODE_RANK", d.node_rank));
  }
  DLAUNCH_READ(nproc, "PET_NPROC_PER_NODE", 1);
  d.nproc = nproc;
  const std::string* addr = Get(env, "PET_MASTER_ADDR");
  if (addr == nullptr) addr = Get(env, "MASTER_ADDR");
  if (addr != nullptr) d.master_addr = *addr;
  DLAUNCH_READ(port, "PET_MASTER_PORT", 1);
  if (!port) {
    DLAUNCH_READ(plain, "MASTER_PORT", 1);
    port = plain;
  }
  d.master_port = port;
  if (const std::string* ep = Get(env, "PET_RDZV_ENDPOINT")) d.rdzv_endpoint = *ep;
  if (const std::string* id = Get(env, "PET_RDZV_ID")) d.run_id = *id;
  if (!d.master_addr.empty())
    d.evidence.push_back(fmt::format("master {} from PET_MASTER_ADDR/MASTER_ADDR", d.master_addr));
  return d;
}

Result<Detected> Slurm(const EnvMap& env) {
  Detected d;
  d.source = Source::kSlurm;
  DLAUNCH_READ(node, "SLURM_NODEID", 0);
  DLAUNCH_READ(nnodes, "SLURM_NNODES", 1, kMaxCount);
  if (!nnodes) {
    DLAUNCH_READ(job_nodes, "SLURM_JOB_NUM_NODES", 1, kMaxCount);
    nnodes = job_nodes;
  }
  d.node_rank = node.value_or(0);
  d.nnodes = nnodes.value_or(1);
  d.run_id = *Get(env, "SLURM_JOB_ID");
  d.evidence.push_back(
      fmt::format("Slurm job {}: node {} of {} from SLURM_NODEID/SLURM_NNODES", d.run_id, d.node_rank, d.nnodes));
  const std::string* list = Get(env, "SLURM_JOB_NODELIST");
  if (list == nullptr) list = Get(env, "SLURM_NODELIST");
  if (list != nullptr) {
    Result<std::vector<std::string>> hosts = ExpandHostlist(*list);
    if (!hosts.ok()) return Status::InvalidArgument(fmt::format("SLURM_JOB_NODELIST: {}", hosts.status().message()));
    d.hosts = *hosts;
    if (!d.hosts.empty()) {
      d.master_addr = d.hosts[0];
      d.evidence.push_back(fmt::format("master {}: the first host of SLURM_JOB_NODELIST={}", d.master_addr, *list));
    }
  }
  DLAUNCH_READ(procid, "SLURM_PROCID", 0);
  DLAUNCH_READ(ntasks, "SLURM_NTASKS", 1, kMaxCount);
  DLAUNCH_READ(localid, "SLURM_LOCALID", 0);
  DLAUNCH_READ(per_node, "SLURM_NTASKS_PER_NODE", 1);
  if (procid && ntasks && localid) {
    d.has_process_view = true;
    d.rank = *procid;
    d.world_size = *ntasks;
    d.local_rank = *localid;
    // This step's tasks on this node: srun's "2(x3),1" counts, which also cover
    // uneven steps (-n 5 on 2 nodes); --ntasks-per-node; else an even share.
    std::optional<int> here;
    for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
      if (const std::string* counts = Get(env, name); counts != nullptr && !here) {
        here = TasksOnNode(*counts, d.node_rank);
        if (!here)
          return Status::InvalidArgument(
              fmt::format("{}: expected counts like '2(x3),1' covering node {}, got '{}'", name, d.node_rank, *counts));
      }
    }
    d.local_size = here.value_or(per_node.value_or(std::max(1, *ntasks / std::max(1, d.nnodes))));
    d.evidence.push_back(fmt::format("task {} of {}, local task {} of {} from SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID",
                                     d.rank, d.world_size, d.local_rank, d.local_size));
  }
  // MpiParams=ports=A-B gives each step its own range; its first port keeps two
  // steps on one node from meeting at the same rendezvous.
  if (const std::string* ports = Get(env, "SLURM_STEP_RESV_PORTS")) {
    int first = 0;
    auto [ptr, ec] = std::from_chars(ports->data(), ports->data() + ports->size(), first);
    if (ec == std::errc() && first >= 1 && first <= 65535) {
      d.rdzv_port = first;
      d.evidence.push_back(fmt::format("rendezvous port {} from SLURM_STEP_RESV_PORTS={}", first, *ports));
    }
  }
  return d;
}

Result<Detected> OpenMpi(const EnvMap& env) {
  Detected d;
  d.source = Source::kOpenMpi;
  DLAUNCH_READ(rank, "OMPI_COMM_WORLD_RANK", 0);
  DLAUNCH_READ(size, "OMPI_COMM_WORLD_SIZE", 1, kMaxCount);
  DLAUNCH_READ(local_rank, "OMPI_COMM_WORLD_LOCAL_RANK", 0);
  DLAUNCH_READ(local_size, "OMPI_COMM_WORLD_LOCAL_SIZE", 1);
  if (!size) return Status::InvalidArgument("OMPI_COMM_WORLD_SIZE: missing beside OMPI_COMM_WORLD_RANK");
  // One dlaunch per node: the MPI rank is the node rank. OMPI_COMM_WORLD_NODE_RANK
  // is not (it counts processes on a node).
  d.node_rank = rank.value_or(0);
  d.nnodes = *size;
  d.evidence.push_back(fmt::format("node rank {} of {} from OMPI_COMM_WORLD_RANK/SIZE", d.node_rank, d.nnodes));
  if (const std::string* job = Get(env, "OMPI_MCA_ess_base_jobid")) d.run_id = "ompi-" + *job;
  d.has_process_view = true;
  d.rank = d.node_rank;
  d.world_size = d.nnodes;
  d.local_rank = local_rank.value_or(0);
  d.local_size = local_size.value_or(1);
  if (const std::string* m = Get(env, "AZ_BATCH_MASTER_NODE")) {
    if (Status s = SetMaster(d, "AZ_BATCH_MASTER_NODE", *m); !s.ok()) return s;
    d.evidence.push_back(fmt::format("master {} from AZ_BATCH_MASTER_NODE", *m));
  }
  return d;
}

Result<Detected> Azure(const EnvMap& env) {
  Detected d;
  d.source = Source::kAzure;
  if (const std::string* m = Get(env, "AZ_BATCH_MASTER_NODE")) {
    if (Status s = SetMaster(d, "AZ_BATCH_MASTER_NODE", *m); !s.ok()) return s;
    d.evidence.push_back(fmt::format("master {} from AZ_BATCH_MASTER_NODE (multi-node)", *m));
  } else if (const std::string* a = Get(env, "AZ_BATCHAI_MPI_MASTER_NODE")) {
    d.master_addr = *a;
    d.evidence.push_back(fmt::format("master {} from AZ_BATCHAI_MPI_MASTER_NODE (single node)", *a));
  }
  DLAUNCH_READ(node_rank, "NODE_RANK", 0);
  if (node_rank) {
    d.node_rank = *node_rank;
    d.evidence.push_back(fmt::format("node rank {} from NODE_RANK", d.node_rank));
  }
  DLAUNCH_READ(count, "AZUREML_NODE_COUNT", 1, kMaxCount);
  if (count) {
    d.nnodes = *count;
    d.evidence.push_back(fmt::format("{} nodes from AZUREML_NODE_COUNT", d.nnodes));
  }
  if (d.node_rank >= d.nnodes)
    return Status::InvalidArgument(fmt::format("NODE_RANK: {} is not below the node count {}{}", d.node_rank, d.nnodes,
                                               count ? " (AZUREML_NODE_COUNT)" : " (AZUREML_NODE_COUNT is not set)"));
  return d;
}

Result<Detected> TfConfig(const EnvMap& env) {
  const std::string& text = *Get(env, "TF_CONFIG");
  auto bad = [&](const char* what) {
    return Status::InvalidArgument(fmt::format("TF_CONFIG: {} in '{}'", what, Shown(text)));
  };
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) return bad("not a JSON object");
  const auto* cluster = v.as_object().if_contains("cluster");
  const auto* task = v.as_object().if_contains("task");
  if (cluster == nullptr || !cluster->is_object() || task == nullptr || !task->is_object())
    return bad("no cluster or task");
  const auto* type = task->as_object().if_contains("type");
  const auto* index = task->as_object().if_contains("index");
  if (type == nullptr || !type->is_string() || index == nullptr || !index->is_int64())
    return bad("task without type and index");
  Detected d;
  d.source = Source::kTfConfig;
  // Nodes in TensorFlow's order: chief, workers, ps; this task's position is its node rank.
  int position = 0;
  bool found = false;
  for (const char* role : {"chief", "worker", "ps"}) {
    const auto* tasks = cluster->as_object().if_contains(role);
    if (tasks == nullptr) continue;
    if (!tasks->is_array()) return bad("a cluster role that is not a list");
    for (size_t i = 0; i < tasks->as_array().size(); ++i) {
      const auto& t = tasks->as_array()[i];
      if (!t.is_string()) return bad("a task address that is not a string");
      std::string addr(t.as_string());
      d.hosts.push_back(addr.substr(0, addr.rfind(':')));
      if (type->as_string() == role && static_cast<int64_t>(i) == index->as_int64()) {
        d.node_rank = position;
        found = true;
      }
      ++position;
    }
  }
  if (!found && type->as_string() != "evaluator") return bad("a task that is not in the cluster");
  d.nnodes = position;
  if (!d.hosts.empty()) d.master_addr = d.hosts[0];
  d.evidence.push_back(fmt::format("task {} {}: node {} of {} from TF_CONFIG", std::string(type->as_string()),
                                   index->as_int64(), d.node_rank, d.nnodes));
  return d;
}

#undef DLAUNCH_READ

}  // namespace

std::string_view SourceName(Source source) {
  switch (source) {
    case Source::kKubeflow:
      return "kubeflow";
    case Source::kSlurm:
      return "slurm";
    case Source::kOpenMpi:
      return "openmpi";
    case Source::kAzure:
      return "azure";
    case Source::kTfConfig:
      return "tfconfig";
    case Source::kLocal:
      return "local";
  }
  return "local";
}

Result<Detected> Detect(const EnvMap& env) {
  for (const char* v : {"PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_RDZV_ENDPOINT"})
    if (env.contains(v)) return Kubeflow(env);
  if (env.contains("SLURM_JOB_ID") && env.contains("SLURM_NODEID")) return Slurm(env);
  if (env.contains("OMPI_COMM_WORLD_RANK")) return OpenMpi(env);
  if (env.contains("AZ_BATCH_MASTER_NODE") || env.contains("AZ_BATCHAI_MPI_MASTER_NODE")) return Azure(env);
  if (env.contains("TF_CONFIG")) return TfConfig(env);
  Detected d;
  d.evidence.push_back("no launcher variables: a single node");
  return d;
}

bool IsLauncherPrivate(std::string_view name) {
  // What mpirun (Open MPI 4) puts in each process it starts. OMPI_MCA_ess=^singleton
  // alone would stop a worker's own MPI_Init from running as a singleton.
  for (std::string_view prefix :
       {"OMPI_COMM_WORLD_", "OMPI_UNIVERSE_SIZE", "OMPI_APP_CTX_", "OMPI_NUM_APP_CTX", "OMPI_FIRST_RANKS",
        "OMPI_FILE_LOCATION", "OMPI_ARGV", "OMPI_COMMAND", "OMPI_MCA_ess", "OMPI_MCA_orte_", "OMPI_MCA_pmix",
        "OMPI_MCA_initial_wdir", "OMPI_MCA_shmem_RUNTIME_QUERY_hint", "PMIX_"})
    if (name.starts_with(prefix)) return true;
  return false;
}

bool IsSlurmTaskVariable(std::string_view name) {
  for (std::string_view v :
       {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NTASKS_PER_NODE",
        "SLURM_STEP_NUM_TASKS", "SLURM_TASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE", "SLURM_GTIDS", "SLURM_TASK_PID"})
    if (name == v) return true;
  return false;
}

}  // namespace dlaunch::envmap
