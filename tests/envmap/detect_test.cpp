#include "envmap/detect.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

namespace dlaunch::envmap {
namespace {

Detected MustDetect(const EnvMap& env) {
  auto d = Detect(env);
  INFO(d.status().message());
  REQUIRE(d.ok());
  return *d;
}

TEST_CASE("hostlists expand with zero padding, several prefixes and groups", "[detect]") {
  struct Case {
    const char* list;
    std::vector<std::string> hosts;
  };
  std::vector<Case> cases = {
      {"node1", {"node1"}},
      {"gpu[001-004,007],cpu01", {"gpu001", "gpu002", "gpu003", "gpu004", "gpu007", "cpu01"}},
      {"b04-[09-10]", {"b04-09", "b04-10"}},
      {"a[1-2],b[8-10]", {"a1", "a2", "b8", "b9", "b10"}},
      {"r[1-2]n[1-2]", {"r1n1", "r1n2", "r2n1", "r2n2"}},
      {"h[7]", {"h7"}},
  };
  for (const Case& c : cases) {
    INFO(c.list);
    auto hosts = ExpandHostlist(c.list);
    REQUIRE(hosts.ok());
    CHECK(*hosts == c.hosts);
  }
  CHECK(ExpandHostlist("gpu[1-").status().message() == "unbalanced '[' in 'gpu[1-'");
  CHECK(ExpandHostlist("gpu1]").status().message() == "unbalanced ']' in 'gpu1]'");
  CHECK(ExpandHostlist("gpu[4-2]").status().message() == "bad range '4-2' in 'gpu[4-2]'");
  CHECK(ExpandHostlist("a,,b").status().message() == "empty host in 'a,,b'");
}

TEST_CASE("hostlists are bounded: no wrap, no overflow, at most 1,048,576 hosts", "[detect][bounds]") {
  // The top of the range ends the loop (an unsigned counter used to wrap and run for ever).
  auto top = ExpandHostlist("a[4294967295-4294967295]");
  REQUIRE(top.ok());
  CHECK(*top == std::vector<std::string>{"a4294967295"});
  CHECK(ExpandHostlist("a[4294967296]").status().message() ==
        "bad range '4294967296' in 'a[4294967296]' (a number over 4294967295)");
  CHECK(ExpandHostlist("a[4294967295-4294967296]").status().message() ==
        "bad range '4294967295-4294967296' in 'a[4294967295-4294967296]' (a number over 4294967295)");
  // Counted before anything is allocated, on the product of the groups.
  CHECK(ExpandHostlist("a[0-99999]b[0-99999]").status().message() ==
        "'a[0-99999]b[0-99999]' expands to 10000000000 hosts, over the limit of 1048576");
  CHECK(ExpandHostlist("a[0-4294967295]").status().message() ==
        "'a[0-4294967295]' expands to 4294967296 hosts, over the limit of 1048576");
  CHECK(ExpandHostlist("a[0-999999],b[0-999999]").status().message() ==
        "'a[0-999999],b[0-999999]' expands to 2000000 hosts, over the limit of 1048576");
  // Twenty groups of 10 would be 10^20: saturated, never wrapped to a small count.
  std::string deep;
  for (int i = 0; i < 20; ++i) deep += "[0-9]";
  CHECK(ExpandHostlist(deep).status().message() == fmt::format("'{}' expands to more than 1048576 hosts", deep));
  auto most = ExpandHostlist("n[1-1048576]");
  REQUIRE(most.ok());
  CHECK(most->size() == 1048576);
  CHECK(most->back() == "n1048576");
  // A long list is quoted in part, so that the message stays one readable line.
  std::string long_list = std::string(300, 'x') + "[";
  CHECK(ExpandHostlist(long_list).status().message() == "unbalanced '[' in '" + std::string(200, 'x') + "...'");
  // Host names are DNS names: at most 255 bytes, which also bounds the memory.
  std::string many;
  for (int i = 0; i < 20000; ++i) many += "[1]";
  CHECK(ExpandHostlist(many).status().message() ==
        "'" + many.substr(0, 200) + "...' makes a host name of 20000 bytes, over the limit of 255");
  CHECK(ExpandHostlist(std::string(255, 'h')).ok());
}

TEST_CASE("node and task counts from the surroundings are bounded", "[detect][bounds]") {
  CHECK(Detect({{"SLURM_JOB_ID", "1"}, {"SLURM_NODEID", "0"}, {"SLURM_NNODES", "2000000000"}}).status().message() ==
        "SLURM_NNODES: expected a number from 1 to 1048576, got '2000000000'");
  CHECK(Detect({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2147483647"}}).status().message() ==
        "OMPI_COMM_WORLD_SIZE: expected a number from 1 to 1048576, got '2147483647'");
  CHECK(Detect({{"AZ_BATCH_MASTER_NODE", "h:6105"}, {"AZUREML_NODE_COUNT", "1048577"}}).status().message() ==
        "AZUREML_NODE_COUNT: expected a number from 1 to 1048576, got '1048577'");
  CHECK(Detect({{"PET_NNODES", "1:2000000000"}}).status().message() ==
        "PET_NNODES: expected N or MIN:MAX, got '1:2000000000'");
  CHECK(MustDetect({{"SLURM_JOB_ID", "1"}, {"SLURM_NODEID", "0"}, {"SLURM_NNODES", "1048576"}}).nnodes == 1048576);
}

TEST_CASE("values quoted from the environment are escaped and cut", "[detect][bounds]") {
  CHECK(ExpandHostlist("a\x1b[2J").status().message() == "unbalanced '[' in 'a\\x1b[2J'");
  CHECK(Detect({{"TF_CONFIG", "\x07{"}}).status().message() == "TF_CONFIG: not a JSON object in '\\x07{'");
  CHECK(Detect({{"SLURM_JOB_ID", "1"}, {"SLURM_NODEID", "\x7f"}}).status().message() ==
        "SLURM_NODEID: expected a number >= 0, got '\\x7f'");
}

TEST_CASE("Slurm task counts never overflow", "[detect][bounds]") {
  CHECK(TasksOnNode("2(x2147483647),3(x2147483647)", 2147483647) == 3);
  CHECK(TasksOnNode("2(x2147483647),3(x2147483647),4", 2147483647) == 3);
}

TEST_CASE("each source, from recorded variables", "[detect]") {
  struct Case {
    const char* name;
    EnvMap env;
    Source source;
    int node_rank;
    int nnodes;
    std::string master;
  };
  std::vector<Case> cases = {
      {"kubeflow",
       {{"PET_NNODES", "2:4"},
        {"PET_NODE_RANK", "1"},
        {"PET_MASTER_ADDR", "job-master-0"},
        {"PET_MASTER_PORT", "23456"},
        {"SLURM_JOB_ID", "9"},
        {"SLURM_NODEID", "0"}},
       Source::kKubeflow,
       1,
       4,
       "job-master-0"},
      {"slurm",
       {{"SLURM_JOB_ID", "77"},
        {"SLURM_NODEID", "2"},
        {"SLURM_NNODES", "3"},
        {"SLURM_JOB_NODELIST", "gpu[007-009]"},
        {"OMPI_COMM_WORLD_RANK", "0"}},
       Source::kSlurm,
       2,
       3,
       "gpu007"},
      {"openmpi",
       {{"OMPI_COMM_WORLD_RANK", "1"},
        {"OMPI_COMM_WORLD_SIZE", "2"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
        {"OMPI_COMM_WORLD_NODE_RANK", "0"},
        {"AZ_BATCH_MASTER_NODE", "10.0.0.4:6105"}},
       Source::kOpenMpi,
       1,
       2,
       "10.0.0.4"},
      {"azure multi-node",
       {{"AZ_BATCH_MASTER_NODE", "10.0.0.4:6105"}, {"NODE_RANK", "3"}, {"AZUREML_NODE_COUNT", "4"}},
       Source::kAzure,
       3,
       4,
       "10.0.0.4"},
      {"azure single node", {{"AZ_BATCHAI_MPI_MASTER_NODE", "10.0.0.5"}}, Source::kAzure, 0, 1, "10.0.0.5"},
      {"tf_config",
       {{"TF_CONFIG", R"({"cluster":{"worker":["w0:2222","w1:2222"],"chief":["c0:2222"],"ps":["p0:1"]},)"
                      R"("task":{"type":"worker","index":1},"environment":"cloud"})"}},
       Source::kTfConfig,
       2,
       4,
       "c0"},
      {"local", {{"PATH", "/bin"}}, Source::kLocal, 0, 1, ""},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Detected d = MustDetect(c.env);
    CHECK(d.source == c.source);
    CHECK(d.node_rank == c.node_rank);
    CHECK(d.nnodes == c.nnodes);
    CHECK(d.master_addr == c.master);
    CHECK_FALSE(d.evidence.empty());
  }
}

TEST_CASE("source details: ports, ids, hosts and the per-process view", "[detect]") {
  Detected k = MustDetect({{"PET_NNODES", "2"},
                           {"PET_MASTER_ADDR", "m"},
                           {"PET_MASTER_PORT", "23456"},
                           {"PET_NPROC_PER_NODE", "4"},
                           {"PET_RDZV_ID", "job7"}});
  CHECK(k.master_port == std::optional<int>(23456));
  CHECK(k.nproc == std::optional<int>(4));
  CHECK(k.run_id == "job7");

  Detected s = MustDetect({{"SLURM_JOB_ID", "77"},
                           {"SLURM_NODEID", "0"},
                           {"SLURM_NNODES", "1"},
                           {"SLURM_JOB_NODELIST", "vm"},
                           {"SLURM_PROCID", "1"},
                           {"SLURM_NTASKS", "2"},
                           {"SLURM_LOCALID", "1"}});
  CHECK(s.run_id == "77");
  CHECK(s.hosts == std::vector<std::string>{"vm"});
  REQUIRE(s.has_process_view);
  CHECK(s.rank == 1);
  CHECK(s.world_size == 2);
  CHECK(s.local_rank == 1);
  CHECK(s.local_size == 2);

  // srun -n 5 on two nodes: 3 tasks on the first, 2 on the second.
  Detected uneven = MustDetect({{"SLURM_JOB_ID", "78"},
                                {"SLURM_NODEID", "1"},
                                {"SLURM_NNODES", "2"},
                                {"SLURM_JOB_NODELIST", "n[1-2]"},
                                {"SLURM_PROCID", "4"},
                                {"SLURM_NTASKS", "5"},
                                {"SLURM_LOCALID", "1"},
                                {"SLURM_STEP_TASKS_PER_NODE", "3,2"},
                                {"SLURM_TASKS_PER_NODE", "4(x2)"},
                                {"SLURM_STEP_RESV_PORTS", "12000-12003"}});
  CHECK(uneven.local_size == 2);
  CHECK(uneven.rdzv_port == std::optional<int>(12000));
  CHECK_FALSE(s.rdzv_port);

  // mpirun -np 4 on two nodes, two per node: rank 3 is local rank 1 of 2.
  Detected m = MustDetect({{"OMPI_COMM_WORLD_RANK", "3"},
                           {"OMPI_COMM_WORLD_SIZE", "4"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                           {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                           {"OMPI_COMM_WORLD_NODE_RANK", "1"}});
  CHECK(m.rank == 3);
  CHECK(m.world_size == 4);
  CHECK(m.local_rank == 1);
  CHECK(m.local_size == 2);
  CHECK(m.master_addr.empty());  // left to --rdzv-endpoint or the MPI bootstrap
}

TEST_CASE("Slurm's per-node task counts", "[detect]") {
  struct Case {
    const char* counts;
    int node;
    std::optional<int> tasks;
  };
  std::vector<Case> cases = {
      {"2", 0, 2},
      {"2(x3),1", 0, 2},
      {"2(x3),1", 2, 2},
      {"2(x3),1", 3, 1},
      {"2(x3),1", 4, std::nullopt},
      {"1,4,2", 1, 4},
      {"3(x2)", 1, 3},
      {"", 0, std::nullopt},
      {"2(x", 0, std::nullopt},
      {"2(x0)", 0, std::nullopt},
      {"x", 0, std::nullopt},
      {"0", 0, std::nullopt},
  };
  for (const Case& c : cases) {
    INFO(c.counts << " node " << c.node);
    CHECK(TasksOnNode(c.counts, c.node) == c.tasks);
  }
}

TEST_CASE("malformed variables are named with their value", "[detect]") {
  CHECK(Detect({{"SLURM_JOB_ID", "1"}, {"SLURM_NODEID", "x"}}).status().message() ==
        "SLURM_NODEID: expected a number >= 0, got 'x'");
  CHECK(Detect({{"PET_NNODES", "2:x"}}).status().message() == "PET_NNODES: expected N or MIN:MAX, got '2:x'");
  CHECK(Detect({{"OMPI_COMM_WORLD_RANK", "0"}}).status().message() ==
        "OMPI_COMM_WORLD_SIZE: missing beside OMPI_COMM_WORLD_RANK");
  CHECK(Detect({{"AZ_BATCH_MASTER_NODE", "h:99999"}}).status().message() ==
        "AZ_BATCH_MASTER_NODE: expected ADDR:PORT, got 'h:99999'");
  CHECK(Detect({{"TF_CONFIG", "{"}}).status().message() == "TF_CONFIG: not a JSON object in '{'");
  CHECK(Detect({{"AZ_BATCH_MASTER_NODE", "h:6105"}, {"NODE_RANK", "1"}}).status().message() ==
        "NODE_RANK: 1 is not below the node count 1 (AZUREML_NODE_COUNT is not set)");
  CHECK(Detect({{"SLURM_JOB_ID", "1"},
                {"SLURM_NODEID", "1"},
                {"SLURM_NNODES", "2"},
                {"SLURM_PROCID", "1"},
                {"SLURM_NTASKS", "2"},
                {"SLURM_LOCALID", "0"},
                {"SLURM_STEP_TASKS_PER_NODE", "2"}})
            .status()
            .message() == "SLURM_STEP_TASKS_PER_NODE: expected counts like '2(x3),1' covering node 1, got '2'");
  CHECK(Detect({{"SLURM_JOB_ID", "1"}, {"SLURM_NODEID", "0"}, {"SLURM_JOB_NODELIST", "a[1-"}}).status().message() ==
        "SLURM_JOB_NODELIST: unbalanced '[' in 'a[1-'");
}

TEST_CASE("the launcher's own MPI identity is not passed to workers", "[detect]") {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_UNIVERSE_SIZE", "PMIX_RANK",
                           "PMIX_NAMESPACE", "OMPI_MCA_ess_base_vpid", "OMPI_MCA_orte_hnp_uri", "OMPI_MCA_ess",
                           "OMPI_MCA_pmix", "OMPI_ARGV", "OMPI_COMMAND"})
    CHECK(IsLauncherPrivate(name));
  // A user's MCA settings and everything else go through.
  for (const char* name :
       {"OMPI_MCA_btl", "OMPI_ALLOW_RUN_AS_ROOT", "OMPI_MCA_rmaps_base_oversubscribe", "PATH", "MASTER_ADDR"})
    CHECK_FALSE(IsLauncherPrivate(name));
}

TEST_CASE("Slurm's task view is told apart from the job's", "[detect]") {
  for (const char* name : {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_STEP_NUM_TASKS",
                           "SLURM_TASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE"})
    CHECK(IsSlurmTaskVariable(name));
  for (const char* name :
       {"SLURM_JOB_ID", "SLURM_NODEID", "SLURM_NNODES", "SLURM_JOB_NODELIST", "SLURM_NTASKSX", "PATH"})
    CHECK_FALSE(IsSlurmTaskVariable(name));
}

}  // namespace
}  // namespace dlaunch::envmap
