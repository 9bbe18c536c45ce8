#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "envmap/worker_env.hpp"
#include "tests/envmap/fixtures.hpp"

namespace dlaunch::envmap {
namespace {

// The shared three-node layout, with host names distinct from addresses and
// Azure's default port.
JobLayout ThreeNodesOnHosts(int node_rank) {
  JobLayout layout = testing::ThreeNodes(node_rank);
  for (Node& node : layout.nodes) node.host = "host-" + node.host;
  layout.master_port = 6105;
  return layout;
}

JobLayout SingleNode(int nproc) {
  JobLayout layout;
  layout.nodes = {{"solo", "127.0.0.1", nproc, {}}};
  layout.master_addr = "127.0.0.1";
  layout.master_port = 54965;
  return layout;
}

TEST_CASE("OmpiEnv per worker of a 2+3+1 job", "[envmap][ompi]") {
  // OMPI_COMM_WORLD_NODE_RANK is Open MPI's local rank, not the node's index: on
  // node 2 it is 0, on node 1 it runs 0..2.
  static const struct {
    int node_rank;
    int local_rank;
    EnvVars want;
  } kCases[] = {
      {0,
       1,
       {{"OMPI_COMM_WORLD_RANK", "1"},
        {"OMPI_COMM_WORLD_SIZE", "6"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
        {"OMPI_COMM_WORLD_NODE_RANK", "1"},
        {"OMPI_UNIVERSE_SIZE", "6"}}},
      {1,
       0,
       {{"OMPI_COMM_WORLD_RANK", "2"},
        {"OMPI_COMM_WORLD_SIZE", "6"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
        {"OMPI_COMM_WORLD_NODE_RANK", "0"},
        {"OMPI_UNIVERSE_SIZE", "6"}}},
      {1,
       2,
       {{"OMPI_COMM_WORLD_RANK", "4"},
        {"OMPI_COMM_WORLD_SIZE", "6"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
        {"OMPI_COMM_WORLD_NODE_RANK", "2"},
        {"OMPI_UNIVERSE_SIZE", "6"}}},
      {2,
       0,
       {{"OMPI_COMM_WORLD_RANK", "5"},
        {"OMPI_COMM_WORLD_SIZE", "6"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
        {"OMPI_COMM_WORLD_NODE_RANK", "0"},
        {"OMPI_UNIVERSE_SIZE", "6"}}},
  };
  for (const auto& c : kCases) {
    INFO("node " << c.node_rank << " local " << c.local_rank);
    JobLayout layout = ThreeNodesOnHosts(c.node_rank);
    WorkerSlot slot = LocalSlots(layout)[static_cast<size_t>(c.local_rank)];
    CHECK(OmpiEnv(layout, slot) == c.want);
  }
}

TEST_CASE("HorovodEnv per worker of a 2+3+1 job", "[envmap][horovod]") {
  // CROSS_* as horovodrun counts them: among the nodes that have this local rank
  // (local rank 1 exists on nodes 0 and 1 only; local rank 2 on node 1 alone).
  static const struct {
    int node_rank;
    int local_rank;
    EnvVars want;
  } kCases[] = {
      {0,
       0,
       {{"HOROVOD_RANK", "0"},
        {"HOROVOD_SIZE", "6"},
        {"HOROVOD_LOCAL_RANK", "0"},
        {"HOROVOD_LOCAL_SIZE", "2"},
        {"HOROVOD_CROSS_RANK", "0"},
        {"HOROVOD_CROSS_SIZE", "3"},
        {"HOROVOD_HOSTNAME", "host-a"}}},
      {1,
       1,
       {{"HOROVOD_RANK", "3"},
        {"HOROVOD_SIZE", "6"},
        {"HOROVOD_LOCAL_RANK", "1"},
        {"HOROVOD_LOCAL_SIZE", "3"},
        {"HOROVOD_CROSS_RANK", "1"},
        {"HOROVOD_CROSS_SIZE", "2"},
        {"HOROVOD_HOSTNAME", "host-b"}}},
      {1,
       2,
       {{"HOROVOD_RANK", "4"},
        {"HOROVOD_SIZE", "6"},
        {"HOROVOD_LOCAL_RANK", "2"},
        {"HOROVOD_LOCAL_SIZE", "3"},
        {"HOROVOD_CROSS_RANK", "0"},
        {"HOROVOD_CROSS_SIZE", "1"},
        {"HOROVOD_HOSTNAME", "host-b"}}},
      {2,
       0,
       {{"HOROVOD_RANK", "5"},
        {"HOROVOD_SIZE", "6"},
        {"HOROVOD_LOCAL_RANK", "0"},
        {"HOROVOD_LOCAL_SIZE", "1"},
        {"HOROVOD_CROSS_RANK", "2"},
        {"HOROVOD_CROSS_SIZE", "3"},
        {"HOROVOD_HOSTNAME", "host-c"}}},
  };
  const EnvVars store = {{"HOROVOD_GLOO_RENDEZVOUS_ADDR", "10.0.0.1"},
                         {"HOROVOD_GLOO_RENDEZVOUS_PORT", "6106"},
                         {"HOROVOD_CONTROLLER", "gloo"},
                         {"HOROVOD_CPU_OPERATIONS", "gloo"},
                         {"HOROVOD_GLOO_IFACE", "eth1"}};
  for (const auto& c : kCases) {
    INFO("node " << c.node_rank << " local " << c.local_rank);
    JobLayout layout = ThreeNodesOnHosts(c.node_rank);
    layout.master_addr = "10.0.0.1";
    WorkerSlot slot = LocalSlots(layout)[static_cast<size_t>(c.local_rank)];
    Flavors flavors;
    flavors.horovod_iface = "eth1";
    EnvVars want = c.want;
    want.insert(want.end(), store.begin(), store.end());
    CHECK(HorovodEnv(layout, slot, flavors) == want);
  }
}

TEST_CASE("HorovodEnv: no interface, no store under one dlaunch per worker", "[envmap][horovod]") {
  JobLayout layout = ThreeNodesOnHosts(0);
  WorkerSlot slot = LocalSlots(layout)[0];
  EnvVars env = HorovodEnv(layout, slot, {});
  CHECK(Find(env, "HOROVOD_GLOO_IFACE") == nullptr);
  REQUIRE(Find(env, "HOROVOD_GLOO_RENDEZVOUS_PORT") != nullptr);
  CHECK(*Find(env, "HOROVOD_GLOO_RENDEZVOUS_PORT") == "6106");
  // mpirun started one dlaunch per worker: Horovod has MPI, and no store is served.
  layout.process_view = ProcessView{1, 2, 0, 3};
  env = HorovodEnv(layout, slot, {});
  CHECK(Find(env, "HOROVOD_GLOO_RENDEZVOUS_ADDR") == nullptr);
  CHECK(Find(env, "HOROVOD_CONTROLLER") == nullptr);
  CHECK(*Find(env, "HOROVOD_CROSS_SIZE") == "3");
}

TEST_CASE("HorovodHostName tells nodes that share a hostname apart", "[envmap][horovod]") {
  JobLayout layout = ThreeNodesOnHosts(0);
  CHECK(HorovodHostName(layout, 1) == "host-b");
  layout.nodes[2].host = layout.nodes[0].host;
  CHECK(HorovodHostName(layout, 0) == "host-a-0");
  CHECK(HorovodHostName(layout, 1) == "host-b");
  CHECK(HorovodHostName(layout, 2) == "host-a-2");
  WorkerSlot slot = LocalSlots(layout)[0];
  CHECK(*Find(HorovodEnv(layout, slot, {}), "HOROVOD_HOSTNAME") == "host-a-0");
}

TEST_CASE("HorovodScopes: every scope of a 2+3+1 job, both spellings", "[envmap][horovod]") {
  using Scopes = std::vector<std::pair<std::string, int>>;
  CHECK(HorovodScopes(ThreeNodesOnHosts(1)) == Scopes{{"global", 6},
                                                      {"global_", 6},
                                                      {"local_host-a", 2},
                                                      {"local_host-b", 3},
                                                      {"local_host-c", 1},
                                                      {"local_0", 2},
                                                      {"local_1", 3},
                                                      {"local_2", 1},
                                                      {"cross_0", 3},
                                                      {"cross_1", 2},
                                                      {"cross_2", 1}});
  CHECK(HorovodScopes(SingleNode(4)) == Scopes{{"global", 4},
                                               {"global_", 4},
                                               {"local_solo", 4},
                                               {"local_0", 4},
                                               {"cross_0", 1},
                                               {"cross_1", 1},
                                               {"cross_2", 1},
                                               {"cross_3", 1}});
}

TEST_CASE("AzureEnv: master node forms and the hostfile", "[envmap][azure]") {
  static const struct {
    const char* what;
    bool multi_node;
    const char* hostfile;
    EnvVars want;
  } kCases[] = {
      {"single node", false, "", {{"AZ_BATCHAI_MPI_MASTER_NODE", "127.0.0.1"}}},
      {"single node with hostfile",
       false,
       "/tmp/job/hostfile",
       {{"AZ_BATCHAI_MPI_MASTER_NODE", "127.0.0.1"}, {"AZUREML_MPI_HOSTFILE", "/tmp/job/hostfile"}}},
      {"multi node", true, "", {{"AZ_BATCHAI_MPI_MASTER_NODE", "10.0.0.1"}, {"AZ_BATCH_MASTER_NODE", "10.0.0.1:6105"}}},
      {"multi node with hostfile",
       true,
       "/tmp/job/hostfile",
       {{"AZ_BATCHAI_MPI_MASTER_NODE", "10.0.0.1"},
        {"AZ_BATCH_MASTER_NODE", "10.0.0.1:6105"},
        {"AZUREML_MPI_HOSTFILE", "/tmp/job/hostfile"}}},
  };
  for (const auto& c : kCases) {
    INFO(c.what);
    JobLayout layout = c.multi_node ? ThreeNodesOnHosts(1) : SingleNode(4);
    Flavors flavors;
    flavors.azure = true;
    flavors.azure_hostfile = c.hostfile;
    CHECK(AzureEnv(layout, flavors) == c.want);
  }
}

TEST_CASE("AzureEnv brackets an IPv6 master in AZ_BATCH_MASTER_NODE", "[envmap][azure]") {
  JobLayout layout = ThreeNodesOnHosts(0);
  layout.master_addr = "fd00::1";
  EnvVars want = {{"AZ_BATCHAI_MPI_MASTER_NODE", "fd00::1"}, {"AZ_BATCH_MASTER_NODE", "[fd00::1]:6105"}};
  CHECK(AzureEnv(layout, Flavors{}) == want);
}

TEST_CASE("AzureHostfile lists every node's addr and slots in node-rank order", "[envmap][azure]") {
  CHECK(AzureHostfile(ThreeNodesOnHosts(2)) == "10.0.0.1 slots=2\n10.0.0.2 slots=3\n10.0.0.3 slots=1\n");
  CHECK(AzureHostfile(SingleNode(8)) == "127.0.0.1 slots=8\n");
}

TEST_CASE("LocalRankArgs spells torch.distributed.launch's argument", "[envmap][local_rank]") {
  static const struct {
    LocalRankArg style;
    int local_rank;
    std::vector<std::string> want;
  } kCases[] = {
      {LocalRankArg::kNone, 0, {}},
      {LocalRankArg::kNone, 3, {}},
      {LocalRankArg::kDash, 0, {"--local-rank=0"}},
      {LocalRankArg::kDash, 3, {"--local-rank=3"}},
      {LocalRankArg::kUnderscore, 0, {"--local_rank=0"}},
      {LocalRankArg::kUnderscore, 12, {"--local_rank=12"}},
  };
  JobLayout layout;
  layout.nodes = {Node{"h", "h", 16, {}}};
  for (const auto& c : kCases) {
    INFO("style " << static_cast<int>(c.style) << " local " << c.local_rank);
    WorkerSlot slot;
    slot.local_rank = c.local_rank;
    slot.rank = c.local_rank + 100;  // must not leak into the argument
    CHECK(LocalRankArgs(layout, slot, c.style) == c.want);
  }
}

TEST_CASE("a process view (one dlaunch per worker) supplies the machine's shape to every dialect",
          "[envmap][process_view]") {
  // mpirun -np 4 on two hosts, block-mapped: this dlaunch is MPI rank 3, the
  // second process on the second host. The layout is 4 one-worker "nodes".
  JobLayout layout;
  for (int i = 0; i < 4; ++i) layout.nodes.push_back(Node{fmt::format("p{}", i), "10.0.0.1", 1, {}});
  layout.node_rank = 3;
  layout.master_addr = "10.0.0.1";
  layout.master_port = 29500;
  layout.process_view = ProcessView{1, 2, 1, 2};
  WorkerSlot slot = LocalSlots(layout).at(0);
  Flavors flavors;
  flavors.ompi = flavors.horovod = true;
  flavors.local_rank_arg = LocalRankArg::kDash;
  EnvVars env = WorkerEnv(layout, slot, flavors, {});
  auto get = [&](const char* name) { return Find(env, name) ? *Find(env, name) : std::string("<unset>"); };
  CHECK(get("RANK") == "3");
  CHECK(get("WORLD_SIZE") == "4");
  CHECK(get("LOCAL_RANK") == "1");
  CHECK(get("LOCAL_WORLD_SIZE") == "2");
  CHECK(get("GROUP_RANK") == "1");
  CHECK(get("NODE_RANK") == "1");
  CHECK(get("GROUP_WORLD_SIZE") == "2");
  CHECK(get("OMP_NUM_THREADS") == "1");
  CHECK(get("OMPI_COMM_WORLD_RANK") == "3");
  CHECK(get("OMPI_COMM_WORLD_LOCAL_RANK") == "1");
  CHECK(get("OMPI_COMM_WORLD_LOCAL_SIZE") == "2");
  CHECK(get("HOROVOD_LOCAL_RANK") == "1");
  CHECK(get("HOROVOD_CROSS_RANK") == "1");
  CHECK(get("HOROVOD_CROSS_SIZE") == "2");
  CHECK(LocalRankArgs(layout, slot, LocalRankArg::kDash) == std::vector<std::string>{"--local-rank=1"});
}

}  // namespace
}  // namespace dlaunch::envmap
