#include "launcher/config/surroundings.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rendezvous/coordinator.hpp"

namespace dlaunch::launcher {

namespace {

using envmap::Detected;
using envmap::Source;

// One dlaunch per Slurm task or MPI rank.
Status ApplyTasks(const Detected& d, int nproc, Options& o, Surroundings& out) {
  bool per_process = d.has_process_view && nproc == 1;
  if (per_process) {
    o.min_nodes = o.max_nodes = d.world_size;
    o.node_rank = d.rank;
    // The physical node: Slurm says; under mpirun, ranks fill a node before the
    // next (mpirun's default --map-by slot), so it follows from the local size.
    int local = std::max(1, d.local_size);
    envmap::ProcessView view{d.local_rank, d.local_size, d.rank / local, (d.world_size + local - 1) / local};
    if (d.source == Source::kSlurm) {
      view.node_rank = d.node_rank;
      view.nnodes = d.nnodes;
    }
    o.process_view = view;
  } else {
    o.min_nodes = o.max_nodes = d.has_process_view ? d.world_size : d.nnodes;
    o.node_rank = d.has_process_view ? d.rank : d.node_rank;
  }
  o.node_rank_given = true;
  if (o.rdzv_id.empty()) o.rdzv_id = d.run_id;
  if (!o.rdzv_endpoint.empty()) return Status::Ok();
  if (!d.master_addr.empty()) {
    // Slurm's first host, or AZ_BATCH_MASTER_NODE (whose port is MASTER_PORT's).
    o.rdzv_endpoint = fmt::format("{}:{}", d.master_addr, d.rdzv_port.value_or(rendezvous::kDefaultRdzvPort));
    if (d.master_port && !o.master_port) o.master_port = d.master_port;
    return Status::Ok();
  }
  if (d.source == Source::kOpenMpi) {
    out.needs_mpi_bootstrap = true;
    return Status::Ok();
  }
  return Status::InvalidArgument(
      fmt::format("{}: cannot tell where node rank 0 is; give --rdzv-endpoint HOST:PORT", envmap::SourceName(d.source)));
}

}  // namespace

Result<Surroundings> ApplySurroundings(const Detected& d, int nproc, Options& o) {
  Surroundings out;
  out.detected = d;
  if (o.layout_given) return out;
  switch (d.source) {
    case Source::kKubeflow:
    case Source::kLocal:
      return out;
    case Source::kSlurm:
    case Source::kOpenMpi:
      if (Status s = ApplyTasks(d, nproc, o, out); !s.ok()) return s;
      break;
    case Source::kAzure:
    case Source::kTfConfig:
      o.min_nodes = o.max_nodes = d.nnodes;
      o.node_rank = d.node_rank;
      o.node_rank_given = true;
      if (!d.master_addr.empty()) o.master_addr = d.master_addr;
      if (d.master_port && !o.master_port) o.master_port = d.master_port;
      break;
  }
  out.applied = true;
  return out;
}

std::string Explain(const Surroundings& s, const Options& o, int nproc, const std::vector<std::string>& argv) {
  std::string out = fmt::format("source: {}{}\n", envmap::SourceName(s.detected.source),
                                o.layout_given && s.detected.source != Source::kLocal ? " (not used: flags fix the layout)" : "");
  for (const std::string& e : s.detected.evidence) out += fmt::format("  {}\n", e);

  bool head = !o.hostfile.empty() || !o.host_list.empty();
  if (head && o.rdzv_endpoint.empty()) {
    out += fmt::format("mode: head-node launch, one agent per listed node through {}\n", o.remote);
  } else if (!o.rdzv_endpoint.empty() && !o.standalone) {
    out += fmt::format("mode: TCP rendezvous at {}{}, run id {}\n", o.rdzv_endpoint,
                       o.is_host ? (*o.is_host ? " (hosted here)" : " (hosted elsewhere)") : "",
                       o.rdzv_id.empty() ? "none" : o.rdzv_id);
  } else if (s.needs_mpi_bootstrap) {
    out += "mode: TCP rendezvous at rank 0's address, learnt through an Open MPI bootstrap\n";
  } else if (o.max_nodes > 1) {
    out += fmt::format("mode: static multi-node, master {}:{}\n", o.master_addr,
                       o.master_port ? fmt::format("{}", *o.master_port) : "29500");
  } else {
    out += "mode: single node\n";
  }
  out += fmt::format("nodes: {}, this node's rank: {}\n",
                     o.min_nodes == o.max_nodes ? fmt::format("{}", o.max_nodes)
                                                : fmt::format("{}:{}", o.min_nodes, o.max_nodes),
                     o.node_rank_given ? fmt::format("{}", o.node_rank) : "assigned by the coordinator");
  if (o.launch_mode == "per-node") {
    out += "workers on this node: 1 per-node launcher (--launch-mode per-node)\n";
  } else if (const auto& v = o.process_view) {
    out += fmt::format("workers: this dlaunch runs 1 (per-process): RANK {} of {}, LOCAL_RANK {} of {}, node {} of {}\n",
                       o.node_rank, o.max_nodes, v->local_rank, v->local_world_size, v->node_rank, v->nnodes);
  } else {
    out += fmt::format("workers on this node: {}\n", nproc);
  }
  if (!argv.empty()) out += fmt::format("command: {}\n", fmt::join(argv, " "));
  return out;
}

}  // namespace dlaunch::launcher
