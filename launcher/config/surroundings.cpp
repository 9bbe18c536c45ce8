#include "launcher/config/surroundings.hpp"

#include <fmt/format.h>

#include "base/defaults.hpp"

namespace dlaunch::launcher {

namespace {

using envmap::Detected;
using envmap::Source;

// One dlaunch per Slurm task or MPI rank.
Status ApplyTasks(const Detected& d, int nproc, Shape& shape, Surroundings& out) {
  bool per_process = d.has_process_view && nproc == 1;
  if (per_process) {
    shape.min_nodes = shape.max_nodes = d.world_size;
    shape.node_rank = d.rank;
    // The physical node: Slurm says; under mpirun, ranks fill a node before the
    // next (mpirun's default --map-by slot), so it follows from the local size.
    int local = std::max(1, d.local_size);
    envmap::ProcessView view{d.local_rank, d.local_size, d.rank / local, (d.world_size + local - 1) / local};
    if (d.source == Source::kSlurm) {
      view.node_rank = d.node_rank;
      view.nnodes = d.nnodes;
    }
    shape.process_view = view;
  } else {
    shape.min_nodes = shape.max_nodes = d.has_process_view ? d.world_size : d.nnodes;
    shape.node_rank = d.has_process_view ? d.rank : d.node_rank;
  }
  shape.node_rank_known = true;
  if (shape.rdzv_id.empty()) shape.rdzv_id = d.run_id;
  if (shape.rdzv_endpoint) return Status::Ok();
  if (!d.master_addr.empty()) {
    // Slurm's first host, or AZ_BATCH_MASTER_NODE (whose port is MASTER_PORT's).
    shape.rdzv_endpoint = rendezvous::HostPort{d.master_addr, d.rdzv_port.value_or(base::kDefaultRdzvPort)};
    if (d.master_port && !shape.master_port) shape.master_port = d.master_port;
    return Status::Ok();
  }
  if (d.source == Source::kOpenMpi) {
    out.needs_mpi_bootstrap = true;
    return Status::Ok();
  }
  return Status::InvalidArgument(fmt::format("{}: cannot tell where node rank 0 is; give --rdzv-endpoint HOST:PORT",
                                             envmap::SourceName(d.source)));
}

}  // namespace

Result<Surroundings> ApplySurroundings(const Detected& d, int nproc, const Options& o) {
  Surroundings out;
  out.detected = d;
  Shape& shape = out.shape;
  shape.min_nodes = o.min_nodes;
  shape.max_nodes = o.max_nodes;
  shape.node_rank = o.node_rank;
  shape.node_rank_known = o.node_rank_given;
  shape.master_addr = o.master_addr;
  shape.master_port = o.master_port;
  // --standalone runs a single node and ignores the endpoint, as torchrun does.
  if (!o.rdzv_endpoint.empty() && !o.standalone) {
    Result<rendezvous::HostPort> endpoint =
        rendezvous::ParseHostPort(o.rdzv_endpoint, base::kDefaultRdzvPort, "--rdzv-endpoint");
    if (!endpoint.ok()) return endpoint.status();
    shape.rdzv_endpoint = std::move(*endpoint);
  }
  shape.rdzv_id = o.rdzv_id;
  if (FixesLayout(o)) return out;
  switch (d.source) {
    case Source::kKubeflow:
    case Source::kLocal:
      return out;
    case Source::kSlurm:
    case Source::kOpenMpi:
      if (Status s = ApplyTasks(d, nproc, shape, out); !s.ok()) return s;
      break;
    case Source::kAzure:
    case Source::kTfConfig:
      shape.min_nodes = shape.max_nodes = d.nnodes;
      shape.node_rank = d.node_rank;
      shape.node_rank_known = true;
      if (!d.master_addr.empty()) shape.master_addr = d.master_addr;
      if (d.master_port && !shape.master_port) shape.master_port = d.master_port;
      break;
  }
  out.applied = true;
  return out;
}

}  // namespace dlaunch::launcher
