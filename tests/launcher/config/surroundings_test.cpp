#include "launcher/config/surroundings.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <catch2/catch.hpp>

#include "launcher/config/plan.hpp"

namespace dlaunch::launcher {
namespace {

using envmap::EnvMap;
using envmap::ProcessView;

Options MustParse(std::vector<std::string> args) {
  args.insert(args.end(), {"--", "python", "train.py"});
  auto r = ParseCommandLine(args, {});
  INFO(r.status().message());
  REQUIRE(r.ok());
  return *r;
}

// The layout a case expects after ApplySurroundings.
struct WantApplied {
  bool applied;
  bool needs_mpi_bootstrap;
  int nodes;
  int node_rank;
  std::string rdzv_endpoint;
  std::string rdzv_id;
  std::optional<ProcessView> view;
  std::string master_addr = "127.0.0.1";
  std::optional<int> master_port = std::nullopt;
};

struct Case {
  const char* name;
  EnvMap env;
  std::vector<std::string> flags;
  int nproc;
  WantApplied want;
};

std::string Show(const ProcessView& v) {
  return "local " + std::to_string(v.local_rank) + "/" + std::to_string(v.local_world_size) + ", node " +
         std::to_string(v.node_rank) + "/" + std::to_string(v.nnodes);
}

// Recorded from `srun -N1 -n2` on this machine (task 1), and an mpirun -np 4 rank.
const EnvMap kSlurmTask1 = {
    {"SLURM_JOB_ID", "7"}, {"SLURM_NODEID", "0"}, {"SLURM_NNODES", "1"},  {"SLURM_JOB_NODELIST", "vm"},
    {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "1"}, {"SLURM_STEP_TASKS_PER_NODE", "2"}};
const EnvMap kMpiRank3 = {{"OMPI_COMM_WORLD_RANK", "3"},       {"OMPI_COMM_WORLD_SIZE", "4"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                          {"OMPI_COMM_WORLD_NODE_RANK", "1"},  {"OMPI_MCA_ess_base_jobid", "1217527809"}};

EnvMap With(EnvMap env, const EnvMap& more) {
  for (const auto& [k, v] : more) env[k] = v;
  return env;
}

TEST_CASE("the surroundings become the options a user would have typed", "[surroundings]") {
  std::vector<Case> cases = {
      {"slurm, one worker per task: per-process",
       kSlurmTask1,
       {"--nproc-per-node", "1"},
       1,
       {true, false, 2, 1, "vm:29400", "7", ProcessView{1, 2, 0, 1}}},
      {"slurm, several workers per task: per-node, node rank = task rank",
       kSlurmTask1,
       {"--nproc-per-node", "2"},
       2,
       {true, false, 2, 1, "vm:29400", "7", std::nullopt}},
      {"slurm with a reserved port range",
       With(kSlurmTask1, {{"SLURM_STEP_RESV_PORTS", "12000-12001"}}),
       {},
       1,
       {true, false, 2, 1, "vm:12000", "7", ProcessView{1, 2, 0, 1}}},
      {"openmpi per-node: the endpoint comes through MPI",
       kMpiRank3,
       {"--nproc-per-node", "4"},
       4,
       {true, true, 4, 3, "", "ompi-1217527809", std::nullopt}},
      {"openmpi per-process: LOCAL_RANK from OMPI_COMM_WORLD_LOCAL_RANK, node from the local size",
       kMpiRank3,
       {"--nproc-per-node", "1"},
       1,
       {true, true, 4, 3, "", "ompi-1217527809", ProcessView{1, 2, 1, 2}}},
      {"openmpi with --rdzv-endpoint: no bootstrap",
       kMpiRank3,
       {"--nproc-per-node", "2", "--rdzv-endpoint", "h0:29400", "--rdzv-id", "mine"},
       2,
       {true, false, 4, 3, "h0:29400", "mine", std::nullopt}},
      {"openmpi on Azure ML: AZ_BATCH_MASTER_NODE names rank 0",
       With(kMpiRank3, {{"AZ_BATCH_MASTER_NODE", "10.0.0.4:6105"}}),
       {"--nproc-per-node", "2"},
       2,
       {true, false, 4, 3, "10.0.0.4:29400", "ompi-1217527809", std::nullopt, "127.0.0.1", 6105}},
      {"azure: the static form",
       {{"AZ_BATCH_MASTER_NODE", "10.0.0.4:6105"}, {"NODE_RANK", "1"}, {"AZUREML_NODE_COUNT", "2"}},
       {},
       1,
       {true, false, 2, 1, "", "", std::nullopt, "10.0.0.4", 6105}},
      {"tfconfig: the task's position is the node rank",
       {{"TF_CONFIG", R"({"cluster":{"chief":["c0:2222"],"worker":["w0:2222","w1:2222"]},)"
                      R"("task":{"type":"worker","index":0}})"}},
       {},
       1,
       {true, false, 3, 1, "", "", std::nullopt, "c0"}},
      {"layout flags given: untouched",
       kMpiRank3,
       {"--nnodes", "2", "--node-rank", "1", "--master-addr", "m", "--nproc-per-node", "1"},
       1,
       {false, false, 2, 1, "", "", std::nullopt, "m"}},
      {"local: untouched", {{"PATH", "/bin"}}, {}, 1, {false, false, 1, 0, "", "", std::nullopt}},
      {"kubeflow: PET_ variables are the flags' defaults already",
       {{"PET_NNODES", "2"}, {"PET_NODE_RANK", "1"}},
       {},
       1,
       {false, false, 1, 0, "", "", std::nullopt}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Result<envmap::Detected> d = envmap::Detect(c.env);
    INFO(d.status().message());
    REQUIRE(d.ok());
    Options o = MustParse(c.flags);
    Result<Surroundings> s = ApplySurroundings(*d, c.nproc, o);
    INFO(s.status().message());
    REQUIRE(s.ok());
    const Shape& shape = s->shape;
    CHECK(s->applied == c.want.applied);
    CHECK(s->needs_mpi_bootstrap == c.want.needs_mpi_bootstrap);
    CHECK(shape.min_nodes == c.want.nodes);
    CHECK(shape.max_nodes == c.want.nodes);
    CHECK(shape.node_rank == c.want.node_rank);
    CHECK((shape.rdzv_endpoint ? shape.rdzv_endpoint->ToString() : "") == c.want.rdzv_endpoint);
    CHECK(shape.rdzv_id == c.want.rdzv_id);
    CHECK(shape.process_view.has_value() == c.want.view.has_value());
    if (shape.process_view && c.want.view) CHECK(Show(*shape.process_view) == Show(*c.want.view));
    CHECK(shape.master_addr == c.want.master_addr);
    CHECK(shape.master_port == c.want.master_port);
  }
}

TEST_CASE("a Slurm job without a node list cannot say where rank 0 is", "[surroundings]") {
  EnvMap env = kSlurmTask1;
  env.erase("SLURM_JOB_NODELIST");
  Result<envmap::Detected> d = envmap::Detect(env);
  REQUIRE(d.ok());
  Options o = MustParse({});
  CHECK(ApplySurroundings(*d, 1, o).status().message() ==
        "slurm: cannot tell where node rank 0 is; give --rdzv-endpoint HOST:PORT");
}

TEST_CASE("--explain names the source, the evidence and the mode", "[surroundings]") {
  Result<envmap::Detected> d = envmap::Detect(kMpiRank3);
  REQUIRE(d.ok());
  Result<Plan> plan = Decide(MustParse({"--nproc-per-node", "1"}), *d, MachineFacts{}, kMpiRank3);
  REQUIRE(plan.ok());
  std::string text = Explain(*plan);
  CHECK(text ==
        "source: openmpi\n"
        "  node rank 3 of 4 from OMPI_COMM_WORLD_RANK/SIZE\n"
        "mode: TCP rendezvous at rank 0's address, learnt through an Open MPI bootstrap\n"
        "nodes: 4, this node's rank: 3\n"
        "workers: this dlaunch runs 1 (per-process): RANK 3 of 4, LOCAL_RANK 1 of 2, node 1 of 2\n"
        "command: python train.py\n"
        "where each value came from:\n"
        "  workers per node: 1 (--nproc-per-node)\n"
        "  nodes: 4 (openmpi)\n"
        "  node rank: 3 (openmpi)\n"
        "  rendezvous endpoint: (rank 0's) (an Open MPI bootstrap)\n"
        "  run id: ompi-1217527809 (openmpi)\n"
        "  command: python train.py (as given)\n");
}

}  // namespace
}  // namespace dlaunch::launcher
