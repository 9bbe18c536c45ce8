#include <string>

#include <catch2/catch.hpp>

#include "envmap/worker_env.hpp"
#include "tests/envmap/fixtures.hpp"

namespace dlaunch::envmap {
namespace {

// The shared three-node layout, with the elastic fields set.
JobLayout ThreeNodesRestarted(int node_rank) {
  JobLayout layout = testing::ThreeNodes(node_rank);
  layout.run_id = "job42";
  layout.restart_count = 1;
  layout.max_restarts = 3;
  return layout;
}

std::string Get(const EnvVars& env, const std::string& name) {
  const std::string* value = Find(env, name);
  return value ? *value : "<unset>";
}

int Count(const EnvVars& env, const std::string& name) {
  int n = 0;
  for (const auto& kv : env) n += kv.first == name;
  return n;
}

TEST_CASE("TorchEnv sets exactly torchrun's variables, in order", "[envmap][torch]") {
  JobLayout layout = ThreeNodesRestarted(1);
  WorkerSlot slot = LocalSlots(layout)[2];
  Flavors flavors;
  flavors.error_file = "/tmp/dlaunch/attempt_1/2/error.json";
  EnvVars want = {
      {"RANK", "4"},
      {"LOCAL_RANK", "2"},
      {"WORLD_SIZE", "6"},
      {"LOCAL_WORLD_SIZE", "3"},
      {"GROUP_RANK", "1"},
      {"GROUP_WORLD_SIZE", "3"},
      {"NODE_RANK", "1"},
      {"ROLE_NAME", "default"},
      {"ROLE_RANK", "4"},
      {"ROLE_WORLD_SIZE", "6"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "29500"},
      {"TORCHELASTIC_RUN_ID", "job42"},
      {"TORCHELASTIC_RESTART_COUNT", "1"},
      {"TORCHELASTIC_MAX_RESTARTS", "3"},
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"TORCHELASTIC_ERROR_FILE", "/tmp/dlaunch/attempt_1/2/error.json"},
      {"OMP_NUM_THREADS", "1"},
      {"NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
  };
  CHECK(TorchEnv(layout, slot, flavors, {}) == want);
}

TEST_CASE("TorchEnv per worker of a 2+3+1 job", "[envmap][torch]") {
  static const struct {
    int node_rank;
    int local_rank;
    const char* rank;
    const char* local_world_size;
  } kCases[] = {
      {0, 0, "0", "2"}, {0, 1, "1", "2"},                    // node a
      {1, 0, "2", "3"}, {1, 1, "3", "3"}, {1, 2, "4", "3"},  // node b
      {2, 0, "5", "1"},                                      // node c
  };
  for (const auto& c : kCases) {
    INFO("node " << c.node_rank << " local " << c.local_rank);
    JobLayout layout = ThreeNodesRestarted(c.node_rank);
    WorkerSlot slot = LocalSlots(layout)[static_cast<size_t>(c.local_rank)];
    EnvVars env = TorchEnv(layout, slot, Flavors{}, {});
    CHECK(Get(env, "RANK") == c.rank);
    CHECK(Get(env, "LOCAL_RANK") == std::to_string(c.local_rank));
    CHECK(Get(env, "WORLD_SIZE") == "6");
    CHECK(Get(env, "LOCAL_WORLD_SIZE") == c.local_world_size);
    CHECK(Get(env, "GROUP_RANK") == std::to_string(c.node_rank));
    CHECK(Get(env, "NODE_RANK") == std::to_string(c.node_rank));
    CHECK(Get(env, "GROUP_WORLD_SIZE") == "3");
    CHECK(Get(env, "ROLE_NAME") == "default");
    CHECK(Get(env, "ROLE_RANK") == c.rank);
    CHECK(Get(env, "ROLE_WORLD_SIZE") == "6");
    CHECK(Get(env, "MASTER_ADDR") == "10.0.0.1");
    CHECK(Get(env, "MASTER_PORT") == "29500");
    CHECK(Get(env, "TORCHELASTIC_ERROR_FILE") == "<unset>");
  }
}

TEST_CASE("TorchEnv takes the role from the slot", "[envmap][torch]") {
  JobLayout layout = ThreeNodesRestarted(0);
  WorkerSlot slot;
  slot.local_rank = 1;
  slot.rank = 1;
  slot.role = "worker";
  slot.role_rank = 0;
  slot.role_world_size = 4;
  EnvVars env = TorchEnv(layout, slot, Flavors{}, {});
  CHECK(Get(env, "ROLE_NAME") == "worker");
  CHECK(Get(env, "ROLE_RANK") == "0");
  CHECK(Get(env, "ROLE_WORLD_SIZE") == "4");
  CHECK(Get(env, "RANK") == "1");
}

TEST_CASE("TORCHELASTIC_USE_AGENT_STORE is Python's True or False", "[envmap][torch]") {
  JobLayout layout = ThreeNodesRestarted(0);
  WorkerSlot slot = LocalSlots(layout)[0];
  CHECK(Get(TorchEnv(layout, slot, Flavors{}, {}), "TORCHELASTIC_USE_AGENT_STORE") == "False");
  layout.agent_store = true;
  CHECK(Get(TorchEnv(layout, slot, Flavors{}, {}), "TORCHELASTIC_USE_AGENT_STORE") == "True");
}

TEST_CASE("OMP_NUM_THREADS only with several local workers and no user value", "[envmap][torch]") {
  static const struct {
    int nproc;
    bool inherited;
    const char* want;
  } kCases[] = {
      {1, false, "<unset>"}, {1, true, "<unset>"}, {2, false, "1"}, {2, true, "<unset>"}, {8, false, "1"},
  };
  for (const auto& c : kCases) {
    INFO("nproc " << c.nproc << " inherited " << c.inherited);
    JobLayout layout;
    layout.nodes = {{"solo", "127.0.0.1", c.nproc, {}}};
    EnvMap inherited = {{"PATH", "/usr/bin"}};
    if (c.inherited) inherited["OMP_NUM_THREADS"] = "4";
    EnvVars env = TorchEnv(layout, LocalSlots(layout)[0], Flavors{}, inherited);
    CHECK(Get(env, "OMP_NUM_THREADS") == c.want);
  }
}

TEST_CASE("OMP_NUM_THREADS depends on this node's workers, not the job's", "[envmap][torch]") {
  JobLayout layout = ThreeNodesRestarted(2);  // node c has one worker in a job of six
  CHECK(Get(TorchEnv(layout, LocalSlots(layout)[0], Flavors{}, {}), "OMP_NUM_THREADS") == "<unset>");
}

TEST_CASE("NCCL async error handling is left alone when inherited", "[envmap][torch]") {
  static const struct {
    const char* inherited;  // nullptr: nothing inherited
    const char* nccl;
    const char* torch_nccl;
  } kCases[] = {
      {nullptr, "1", "1"},
      {"NCCL_ASYNC_ERROR_HANDLING", "<unset>", "1"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", "<unset>"},
  };
  for (const auto& c : kCases) {
    INFO("inherited " << (c.inherited ? c.inherited : "nothing"));
    JobLayout layout = ThreeNodesRestarted(0);
    EnvMap inherited;
    if (c.inherited) inherited[c.inherited] = "0";
    EnvVars env = TorchEnv(layout, LocalSlots(layout)[0], Flavors{}, inherited);
    CHECK(Get(env, "NCCL_ASYNC_ERROR_HANDLING") == c.nccl);
    CHECK(Get(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING") == c.torch_nccl);
  }
}

TEST_CASE("WorkerEnv without roles or flavors is TorchEnv", "[envmap][torch]") {
  JobLayout layout = ThreeNodesRestarted(1);
  WorkerSlot slot = LocalSlots(layout)[1];
  EnvMap inherited = {{"OMP_NUM_THREADS", "2"}};
  EnvVars env = WorkerEnv(layout, slot, Flavors{}, inherited);
  CHECK(env == TorchEnv(layout, slot, Flavors{}, inherited));
  CHECK(Find(env, "TF_CONFIG") == nullptr);
  CHECK(Find(env, "OMPI_COMM_WORLD_RANK") == nullptr);
  CHECK(Find(env, "AZ_BATCHAI_MPI_MASTER_NODE") == nullptr);
  CHECK(Find(env, "HOROVOD_RANK") == nullptr);
}

TEST_CASE("WorkerEnv appends each flavor after the torch variables", "[envmap][torch]") {
  JobLayout layout = ThreeNodesRestarted(1);
  WorkerSlot slot = LocalSlots(layout)[2];
  Flavors flavors;
  flavors.ompi = true;
  flavors.azure = true;
  flavors.horovod = true;
  flavors.azure_hostfile = "/tmp/hostfile";
  EnvVars torch = TorchEnv(layout, slot, flavors, {});
  EnvVars want = torch;
  for (EnvVars part : {OmpiEnv(layout, slot), AzureEnv(layout, flavors), HorovodEnv(layout, slot, flavors)}) {
    want.insert(want.end(), part.begin(), part.end());
  }
  EnvVars env = WorkerEnv(layout, slot, flavors, {});
  CHECK(env == want);
  CHECK(env.size() == torch.size() + 6 + 3 + 7 + 4);  // Horovod: 7 rank variables, 4 of the store
}

TEST_CASE("WorkerEnv names the progress file in every mode, only when there is one", "[envmap][torch]") {
  JobLayout layout = ThreeNodesRestarted(1);
  WorkerSlot slot = LocalSlots(layout)[2];
  Flavors flavors;
  CHECK(Find(WorkerEnv(layout, slot, flavors, {}), "DLAUNCH_PROGRESS_FILE") == nullptr);
  flavors.progress_file = "/tmp/dlaunch-x/progress-1-2";
  flavors.horovod = true;
  EnvVars env = WorkerEnv(layout, slot, flavors, {});
  CHECK(Get(env, "DLAUNCH_PROGRESS_FILE") == "/tmp/dlaunch-x/progress-1-2");
  CHECK(env.back().first == "DLAUNCH_PROGRESS_FILE");  // after the dialects, before a role's own
  for (Node& n : layout.nodes) n.nproc = 1;
  flavors.per_node = true;
  CHECK(Get(WorkerEnv(layout, LocalSlots(layout)[0], flavors, {}), "DLAUNCH_PROGRESS_FILE") ==
        "/tmp/dlaunch-x/progress-1-2");
}

TEST_CASE("WorkerEnv adds TF_CONFIG and the role's own variables", "[envmap][torch]") {
  JobLayout layout;
  layout.nodes = {{"a", "10.0.0.1", 2, {2000, 2001}}, {"b", "10.0.0.2", 2, {3000, 3001}}};
  layout.node_rank = 1;
  layout.master_addr = "10.0.0.1";
  layout.master_port = 29500;
  // Seed 000: the ps gets MAGIC=newnumber; here it also moves its own MASTER_PORT.
  layout.roles = {{"chief", 1, {}},
                  {"worker", 2, {{"MAGIC", "number"}}},
                  {"ps", 1, {{"MAGIC", "newnumber"}, {"MASTER_PORT", "1234"}}}};
  std::vector<WorkerSlot> slots = LocalSlots(layout);
  REQUIRE(slots.size() == 2);
  EnvMap inherited = {{"MAGIC", "fromshell"}};

  EnvVars worker = WorkerEnv(layout, slots[0], Flavors{}, inherited);
  CHECK(Get(worker, "ROLE_NAME") == "worker");
  CHECK(Get(worker, "TF_CONFIG") == TfConfig(layout, slots[0]));
  CHECK(Get(worker, "MAGIC") == "number");
  CHECK(Get(worker, "MASTER_PORT") == "29500");
  CHECK(worker.back() == std::pair<std::string, std::string>("MAGIC", "number"));

  EnvVars ps = WorkerEnv(layout, slots[1], Flavors{}, inherited);
  CHECK(Get(ps, "ROLE_NAME") == "ps");
  CHECK(Get(ps, "TF_CONFIG") == TfConfig(layout, slots[1]));
  CHECK(Get(ps, "MAGIC") == "newnumber");
  // The role's value wins and the name appears once, at the end.
  CHECK(Count(ps, "MASTER_PORT") == 1);
  CHECK(Get(ps, "MASTER_PORT") == "1234");
  REQUIRE(ps.size() >= 2);
  CHECK(ps[ps.size() - 2] == std::pair<std::string, std::string>("MAGIC", "newnumber"));
  CHECK(ps.back() == std::pair<std::string, std::string>("MASTER_PORT", "1234"));
  // TF_CONFIG comes right after the torch variables, before the role's.
  EnvVars torch = TorchEnv(layout, slots[0], Flavors{}, inherited);
  REQUIRE(worker.size() == torch.size() + 2);
  CHECK(worker[torch.size()].first == "TF_CONFIG");
}

TEST_CASE("per-node mode gives the node's launcher the node variables and no worker's", "[envmap][torch]") {
  // One launcher per node: every node of the layout runs one process.
  JobLayout layout = ThreeNodesRestarted(2);
  for (Node& n : layout.nodes) n.nproc = 1;
  Flavors flavors;
  flavors.per_node = true;
  EnvVars env = WorkerEnv(layout, LocalSlots(layout)[0], flavors, {});
  CHECK(env == EnvVars{{"NODE_RANK", "2"},
                       {"GROUP_RANK", "2"},
                       {"NNODES", "3"},
                       {"GROUP_WORLD_SIZE", "3"},
                       {"MASTER_ADDR", "10.0.0.1"},
                       {"MASTER_PORT", "29500"},
                       {"AZ_BATCHAI_MPI_MASTER_NODE", "10.0.0.1"},
                       {"AZ_BATCH_MASTER_NODE", "10.0.0.1:29500"}});
  // Seed 004's launch.py reads the Open MPI view: rank = node rank, size = nodes.
  flavors.ompi = flavors.azure = true;
  env = WorkerEnv(layout, LocalSlots(layout)[0], flavors, {});
  CHECK(*Find(env, "OMPI_COMM_WORLD_RANK") == "2");
  CHECK(*Find(env, "OMPI_COMM_WORLD_SIZE") == "3");
  CHECK(Find(env, "RANK") == nullptr);
  CHECK(Find(env, "LOCAL_RANK") == nullptr);
  CHECK(Find(env, "TORCHELASTIC_RUN_ID") == nullptr);
  int azure = 0;
  for (const auto& [name, value] : env) azure += name == "AZ_BATCHAI_MPI_MASTER_NODE";
  CHECK(azure == 1);  // --env azure adds nothing twice
}

TEST_CASE("--virtual-local-rank: LOCAL_RANK 0 and one GPU, as torch 2.x's LocalElasticAgent",
          "[envmap][torch][virtual]") {
  JobLayout layout = ThreeNodesRestarted(1);  // three workers here, global ranks 2-4
  Flavors flavors;
  flavors.virtual_local_rank = true;
  // The launcher's list is narrowed to the worker's own entry, blanks trimmed.
  EnvMap inherited = {{"CUDA_VISIBLE_DEVICES", "3, 5 ,GPU-ab12"}};
  for (auto [i, gpu] : {std::pair{0, "3"}, std::pair{1, "5"}, std::pair{2, "GPU-ab12"}}) {
    EnvVars env = WorkerEnv(layout, LocalSlots(layout)[static_cast<size_t>(i)], flavors, inherited);
    CHECK(Get(env, "LOCAL_RANK") == "0");
    CHECK(Count(env, "LOCAL_RANK") == 1);
    CHECK(Get(env, "CUDA_VISIBLE_DEVICES") == gpu);
    CHECK(Get(env, "RANK") == std::to_string(2 + i));  // the other ranks stay real
    CHECK(Get(env, "LOCAL_WORLD_SIZE") == "3");
  }
  // Unset: local rank N sees GPU N.
  EnvVars env = WorkerEnv(layout, LocalSlots(layout)[2], flavors, {});
  CHECK(Get(env, "CUDA_VISIBLE_DEVICES") == "2");
  // Off: LOCAL_RANK is real and CUDA_VISIBLE_DEVICES is inherited, not set.
  flavors.virtual_local_rank = false;
  env = WorkerEnv(layout, LocalSlots(layout)[2], flavors, inherited);
  CHECK(Get(env, "LOCAL_RANK") == "2");
  CHECK(Get(env, "CUDA_VISIBLE_DEVICES") == "<unset>");
}

TEST_CASE("VirtualGpu: torch's split(',') and strip(), and no entry past the list", "[envmap][torch][virtual]") {
  CHECK(VirtualGpu({}, 7) == "7");
  CHECK(VirtualGpu({{"CUDA_VISIBLE_DEVICES", "0,1"}}, 1) == "1");
  CHECK_FALSE(VirtualGpu({{"CUDA_VISIBLE_DEVICES", "0,1"}}, 2).has_value());
  CHECK(VirtualGpu({{"CUDA_VISIBLE_DEVICES", "0,,2"}}, 1) == "");
  CHECK(VirtualGpu({{"CUDA_VISIBLE_DEVICES", ""}}, 0) == "");
  CHECK_FALSE(VirtualGpu({{"CUDA_VISIBLE_DEVICES", ""}}, 1).has_value());
  CHECK(VirtualGpu({{"CUDA_VISIBLE_DEVICES", "\t6 \n"}}, 0) == "6");
}

}  // namespace
}  // namespace dlaunch::envmap
