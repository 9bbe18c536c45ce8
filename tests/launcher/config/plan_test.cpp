// Decide, one row per surrounding, each asserting the whole plan: the mode, the
// workers, the layout or rendezvous, what the workers inherit, and where each
// value came from; and the coordinator daemon's DecideDaemon.
#include "launcher/config/plan.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/config/cli.hpp"
#include "launcher/config/coordinator_options.hpp"

namespace dlaunch::launcher {
namespace {

using envmap::EnvMap;

// Every decided value, one fact per line, so that a row states the whole plan.
std::string Summary(const Plan& p) {
  std::string out = fmt::format("mode {}\n", ModeName(p.mode()));
  if (const auto* head = std::get_if<HeadPlan>(&p.run)) {
    const HeadPlan& h = *head;
    std::vector<std::string> hosts;
    for (const HostEntry& e : h.hosts) hosts.push_back(e.host);
    out += fmt::format("hosts {} workers {} remote {}\n", fmt::join(hosts, ","), fmt::join(h.workers, ","), h.remote);
    out += fmt::format("agents {} -- {}\n", fmt::join(h.agent_flags, " "), fmt::join(h.command, " "));
    out += fmt::format("coordinator nodes {}:{} restarts {}\n", h.coordinator.min_nodes, h.coordinator.max_nodes,
                       h.coordinator.max_restarts);
  } else {
    const WorkerPlan& w = *p.workers();
    out +=
        fmt::format("workers {} argv {}{}\n", w.nproc, fmt::join(w.argv, " "), w.flavors.per_node ? " per-node" : "");
    if (w.process_view)
      out += fmt::format("process view local {}/{} node {}/{}\n", w.process_view->local_rank,
                         w.process_view->local_world_size, w.process_view->node_rank, w.process_view->nnodes);
    std::vector<std::string> inherited;
    for (const auto& [k, v] : w.inherited) inherited.push_back(k);
    out += fmt::format("inherits {}\n", fmt::join(inherited, ","));
    if (const auto* agent = std::get_if<AgentPlan>(&p.run)) {
      const RendezvousPlan& r = agent->rendezvous;
      out += fmt::format("endpoint {} host {} nodes {}:{} rank {} run {} token {}\n",
                         r.from_mpi ? "(through MPI)" : r.endpoint->ToString(),
                         r.is_host ? (*r.is_host ? "yes" : "no") : "if ours", r.min_nodes, r.max_nodes,
                         r.requested_node_rank, r.coordinator.run_id, r.token.empty() ? "none" : "set");
    } else {
      const StaticPlan& s = std::get<NodePlan>(p.run).layout;
      out += fmt::format("nodes {} rank {} master {}:{}\n", s.nnodes, s.node_rank, s.master_addr,
                         s.master_port ? fmt::format("{}", *s.master_port) : "(picked)");
    }
  }
  for (const Origin& o : p.origins) out += fmt::format("{} = {} <- {}\n", o.what, o.value, o.from);
  return out;
}

struct Row {
  const char* name;
  EnvMap env;
  std::vector<std::string> args;
  std::string want;
};

// Recorded from `srun -N2 -n4` (task 3) and `mpirun -np 4` (rank 3) on two nodes.
const EnvMap kSlurm = {
    {"SLURM_JOB_ID", "7"}, {"SLURM_NODEID", "1"}, {"SLURM_NNODES", "2"},  {"SLURM_JOB_NODELIST", "n[1-2]"},
    {"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}, {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}};
// `srun -N2 --ntasks-per-node=1` (task 1): one per-node launcher on each node.
const EnvMap kSlurmPerNode = {
    {"SLURM_JOB_ID", "8"}, {"SLURM_NODEID", "1"}, {"SLURM_NNODES", "2"},  {"SLURM_JOB_NODELIST", "n[1-2]"},
    {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}, {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"}};
const EnvMap kMpi = {{"OMPI_COMM_WORLD_RANK", "3"},       {"OMPI_COMM_WORLD_SIZE", "4"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                     {"OMPI_COMM_WORLD_NODE_RANK", "1"},  {"OMPI_MCA_ess_base_jobid", "99"}};

Plan MustDecide(const Row& row) {
  Result<Options> o = ParseCommandLine(row.args, row.env);
  INFO(o.status().message());
  REQUIRE(o.ok());
  MachineFacts facts{"here", 8, {}, "fresh"};
  Result<Plan> p = Decide(*o, envmap::Detect(row.env), facts, row.env);
  INFO(p.status().message());
  REQUIRE(p.ok());
  return *p;
}

TEST_CASE("Decide: one plan per surrounding", "[plan]") {
  std::vector<Row> rows = {
      {"flags only, one node",
       {{"PATH", "/bin"}},
       {"--nproc-per-node", "2", "--", "true"},
       "mode single-node\n"
       "workers 2 argv true\n"
       "inherits PATH\n"
       "nodes 1 rank 0 master 127.0.0.1:(picked)\n"
       "workers per node = 2 <- --nproc-per-node\n"
       "nodes = 1 <- default\n"
       "command = true <- as given\n"},
      {"flags, the static multi-node form (torch.distributed.launch)",
       {},
       {"--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1", "--master-port", "1234", "train.py", "--lr",
        "1"},
       "mode static\n"
       "workers 1 argv python3 -u train.py --lr 1\n"
       "inherits \n"
       "nodes 2 rank 1 master 10.0.0.1:1234\n"
       "workers per node = 1 <- default\n"
       "nodes = 2 <- --nnodes\n"
       "node rank = 1 <- --node-rank\n"
       "master = 10.0.0.1:1234 <- --master-addr\n"
       "command = python3 -u train.py --lr 1 <- a script: python3 -u prepended, as torchrun\n"},
      {"PET_ variables (Kubeflow's PyTorchJob): the flags' defaults",
       {{"PET_NNODES", "2"}, {"PET_NODE_RANK", "0"}, {"PET_MASTER_ADDR", "m0"}, {"PET_NPROC_PER_NODE", "3"}},
       {"--", "true"},
       "mode static\n"
       "workers 3 argv true\n"
       "inherits PET_MASTER_ADDR,PET_NNODES,PET_NODE_RANK,PET_NPROC_PER_NODE\n"
       "nodes 2 rank 0 master m0:(picked)\n"
       "workers per node = 3 <- PET_NPROC_PER_NODE\n"
       "nodes = 2 <- PET_NNODES\n"
       "node rank = 0 <- PET_NODE_RANK\n"
       "master = m0:29500 <- PET_MASTER_ADDR\n"
       "command = true <- as given\n"},
      {"Slurm, one dlaunch per task running one worker: per-process",
       kSlurm,
       {"--", "true"},
       "mode rendezvous\n"
       "workers 1 argv true\n"
       "process view local 1/2 node 1/2\n"
       "inherits SLURM_JOB_ID,SLURM_JOB_NODELIST,SLURM_LOCALID,SLURM_NNODES,SLURM_NODEID,SLURM_NTASKS,SLURM_PROCID,"
       "SLURM_STEP_TASKS_PER_NODE\n"
       "endpoint n1:29400 host if ours nodes 4:4 rank 3 run 7 token none\n"
       "workers per node = 1 <- slurm\n"
       "nodes = 4 <- slurm\n"
       "node rank = 3 <- slurm\n"
       "rendezvous endpoint = n1:29400 <- slurm\n"
       "run id = 7 <- slurm\n"
       "command = true <- as given\n"},
      {"Slurm, a per-node launcher in each task: no task identity reaches it (Lightning reads SLURM_PROCID)",
       kSlurmPerNode,
       {"--launch-mode", "per-node", "--", "python", "train.py"},
       "mode rendezvous\n"
       "workers 1 argv python train.py per-node\n"
       "process view local 0/1 node 1/2\n"
       "inherits SLURM_JOB_ID,SLURM_JOB_NODELIST,SLURM_NNODES,SLURM_NODEID\n"
       "endpoint n1:29400 host if ours nodes 2:2 rank 1 run 8 token none\n"
       "workers per node = 1 <- --launch-mode per-node\n"
       "nodes = 2 <- slurm\n"
       "node rank = 1 <- slurm\n"
       "rendezvous endpoint = n1:29400 <- slurm\n"
       "run id = 8 <- slurm\n"
       "command = python train.py <- as given\n"},
      {"Open MPI, one dlaunch per node running 4: per-node, the endpoint through MPI",
       kMpi,
       {"--nproc-per-node", "4", "--", "true"},
       "mode rendezvous\n"
       "workers 4 argv true\n"
       "inherits \n"
       "endpoint (through MPI) host if ours nodes 4:4 rank 3 run ompi-99 token none\n"
       "workers per node = 4 <- --nproc-per-node\n"
       "nodes = 4 <- openmpi\n"
       "node rank = 3 <- openmpi\n"
       "rendezvous endpoint = (rank 0's) <- an Open MPI bootstrap\n"
       "run id = ompi-99 <- openmpi\n"
       "command = true <- as given\n"},
      {"Open MPI, one dlaunch per rank: per-process; the worker is the rank, so its OMPI_COMM_WORLD_* stay",
       kMpi,
       {"--", "true"},
       "mode rendezvous\n"
       "workers 1 argv true\n"
       "process view local 1/2 node 1/2\n"
       "inherits OMPI_COMM_WORLD_LOCAL_RANK,OMPI_COMM_WORLD_LOCAL_SIZE,OMPI_COMM_WORLD_RANK,OMPI_COMM_WORLD_SIZE\n"
       "endpoint (through MPI) host if ours nodes 4:4 rank 3 run ompi-99 token none\n"
       "workers per node = 1 <- openmpi\n"
       "nodes = 4 <- openmpi\n"
       "node rank = 3 <- openmpi\n"
       "rendezvous endpoint = (rank 0's) <- an Open MPI bootstrap\n"
       "run id = ompi-99 <- openmpi\n"
       "command = true <- as given\n"},
      {"Azure ML: the static form, MASTER_PORT from AZ_BATCH_MASTER_NODE",
       {{"AZ_BATCH_MASTER_NODE", "10.0.0.4:6105"}, {"NODE_RANK", "1"}, {"AZUREML_NODE_COUNT", "2"}},
       {"--", "true"},
       "mode static\n"
       "workers 1 argv true\n"
       "inherits AZUREML_NODE_COUNT,AZ_BATCH_MASTER_NODE,NODE_RANK\n"
       "nodes 2 rank 1 master 10.0.0.4:6105\n"
       "workers per node = 1 <- the visible GPUs (auto)\n"
       "nodes = 2 <- azure\n"
       "node rank = 1 <- azure\n"
       "master = 10.0.0.4:6105 <- azure\n"
       "command = true <- as given\n"},
      {"TF_CONFIG: the task's place in the cluster is the node rank",
       {{"TF_CONFIG", R"({"cluster":{"chief":["c0:2222"],"worker":["w0:2222","w1:2222"]},)"
                      R"("task":{"type":"worker","index":0}})"}},
       {"--", "true"},
       "mode static\n"
       "workers 1 argv true\n"
       "inherits TF_CONFIG\n"
       "nodes 3 rank 1 master c0:(picked)\n"
       "workers per node = 1 <- the visible GPUs (auto)\n"
       "nodes = 3 <- tfconfig\n"
       "node rank = 1 <- tfconfig\n"
       "master = c0:29500 <- tfconfig\n"
       "command = true <- as given\n"},
      {"flags beat the surroundings",
       kMpi,
       {"--nnodes", "2", "--node-rank", "1", "--master-addr", "m", "--nproc-per-node", "1", "--", "true"},
       "mode static\n"
       "workers 1 argv true\n"
       "inherits \n"  // mpirun's variables describe dlaunch, not its workers
       "nodes 2 rank 1 master m:(picked)\n"
       "workers per node = 1 <- --nproc-per-node\n"
       "nodes = 2 <- --nnodes\n"
       "node rank = 1 <- --node-rank\n"
       "master = m:29500 <- --master-addr\n"
       "command = true <- as given\n"},
      {"a node agent of the TCP rendezvous, the node list fixing the size",
       {{"DLAUNCH_RDZV_TOKEN", "s3cret"}},
       {"--nodes", "a,b,c", "--rdzv-endpoint", "a:29400", "--rdzv-id", "j", "--max-restarts", "2", "--", "true"},
       "mode rendezvous\n"
       "workers 1 argv true\n"
       "inherits \n"
       "endpoint a:29400 host if ours nodes 3:3 rank -1 run j token set\n"
       "workers per node = 1 <- default\n"
       "nodes = 1 <- default\n"
       "rendezvous endpoint = a:29400 <- --rdzv-endpoint\n"
       "run id = j <- --rdzv-id\n"
       "command = true <- as given\n"},
      {"the head of a job over ssh",
       {{"HOME", "/root"}},
       {"-H", "a:2,b:4", "--max-restarts", "1", "--env", "ompi", "train.py"},
       "mode head\n"
       "hosts a,b workers 2,4 remote ssh\n"
       "agents --tag-output=[{node_rank},{rank}]:  --max-restarts 1 --env ompi -- train.py\n"
       "coordinator nodes 2:2 restarts 1\n"
       "nodes = 2 <- -H\n"
       "workers per node = 2,4 <- the node list's slots, else each node's own\n"},
      {"the head of TF roles across nodes (dlaunch job's TensorFlow form): the roles go to every agent",
       {},
       {"-H", "127.0.0.1:1,127.0.0.2:1", "--roles", "worker:1,ps:1", "--role-env", "ps:MAGIC=n", "--", "t"},
       "mode head\n"
       "hosts 127.0.0.1,127.0.0.2 workers 1,1 remote ssh\n"
       "agents --tag-output=[{node_rank},{rank}]:  --roles worker:1,ps:1 --role-env ps:MAGIC=n -- -- t\n"
       "coordinator nodes 2:2 restarts 0\n"
       "nodes = 2 <- -H\n"
       "workers per node = 1,1 <- the node list's slots, else each node's own\n"},
  };
  for (const Row& row : rows) {
    INFO(row.name);
    CHECK(Summary(MustDecide(row)) == row.want);
    // --explain shows the plan that the run would execute, to the last field.
    Row explained = row;
    explained.args.insert(explained.args.begin(), "--explain");
    CHECK(Summary(MustDecide(explained)) == row.want);
  }
}

TEST_CASE("Decide: the plan after the Open MPI bootstrap hosts on rank 0 only", "[plan]") {
  Plan p = MustDecide({"", kMpi, {"--", "true"}, ""});
  const AgentPlan& before = std::get<AgentPlan>(p.run);
  REQUIRE(before.rendezvous.from_mpi);
  Result<AgentPlan> after = WithMpiEndpoint(before, "n0:4000");
  REQUIRE(after.ok());
  CHECK(after->rendezvous.endpoint->ToString() == "n0:4000");
  CHECK(after->rendezvous.is_host == std::optional<bool>(false));
  CHECK_FALSE(after->rendezvous.from_mpi);
  CHECK(before.rendezvous.from_mpi);  // the plan Decide made stays as it was
  CHECK(WithMpiEndpoint(before, "n0:x").status().message().find("n0:x") != std::string::npos);
}

TEST_CASE("Decide: bad input names the flag, file or variable", "[plan]") {
  auto error = [](EnvMap env, std::vector<std::string> args) {
    Result<Options> o = ParseCommandLine(args, env);
    REQUIRE(o.ok());
    Result<Plan> p = Decide(*o, envmap::Detect(env), MachineFacts{"here", 2, {}, "x"}, env);
    REQUIRE_FALSE(p.ok());
    // --explain refuses what the run would, in the same words (it once
    // returned before the last checks: local ranks, the token file).
    args.insert(args.begin(), "--explain");
    Result<Options> explain = ParseCommandLine(args, env);
    REQUIRE(explain.ok());
    Result<Plan> explained = Decide(*explain, envmap::Detect(env), MachineFacts{"here", 2, {}, "x"}, env);
    REQUIRE_FALSE(explained.ok());
    CHECK(explained.status().message() == p.status().message());
    return p.status().message();
  };
  CHECK(error({}, {"--nproc-per-node", "gpu", "--", "true"}) == "--nproc-per-node: 'gpu' given but no GPU is visible");
  CHECK(error({{"SLURM_NODEID", "x"}, {"SLURM_JOB_ID", "1"}}, {"--", "true"}).starts_with("SLURM_NODEID"));
  CHECK(error({}, {"--local-ranks-filter", "3", "--nproc-per-node", "2", "--", "true"}) ==
        "--local-ranks-filter: local rank 3 is outside this node (0-1)");
  CHECK(error({}, {"--rdzv-endpoint", "a:1", "--rdzv-token-file", "/nonexistent/t", "--", "true"})
            .find("/nonexistent/t") != std::string::npos);
  CHECK(error({}, {"-H", "a,b", "--nnodes", "3", "--", "true"}) ==
        "--nnodes: 3 given, but the node list has 2 host(s)");
}

TEST_CASE("TORCHELASTIC_RUN_ID: the given id, else torchrun's 'none' where nodes must agree", "[plan]") {
  auto run_id = [](std::vector<std::string> args) { return MustDecide({"", {}, args, ""}).workers()->run_id; };
  // Each node of a static job decides alone: a fresh id each would differ.
  CHECK(run_id({"--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1", "--", "true"}) == "none");
  CHECK(run_id({"--nnodes", "2", "--node-rank", "0", "--master-addr", "10.0.0.1", "--rdzv-id", "j7", "--", "true"}) ==
        "j7");
  CHECK(run_id({"--nnodes", "2", "--rdzv-endpoint", "10.0.0.1:29400", "--", "true"}) == "none");
  // One node alone keeps its fresh id, which its logs and events are named by.
  CHECK(run_id({"--nproc-per-node", "2", "--", "true"}) == "fresh");
}

TEST_CASE("the static form with a node list: --node-rank makes it one node of the list, not a head launch", "[plan]") {
  Plan p = MustDecide({"",
                       {},
                       {"--nnodes", "2", "--node-rank", "0", "--master-addr", "10.0.0.1", "--master-port", "29500",
                        "--nodes", "10.0.0.1,10.0.0.2", "--env", "horovod", "--", "true"},
                       ""});
  REQUIRE(p.mode() == Mode::kStatic);
  const StaticPlan& s = std::get<NodePlan>(p.run).layout;
  CHECK(s.node_list == std::vector<std::string>{"10.0.0.1", "10.0.0.2"});
  CHECK(s.node_rank == 0);
  CHECK(s.master_addr == "10.0.0.1");
  // Without a list, the static form as before: no node names known.
  Plan plain =
      MustDecide({"", {}, {"--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1", "--", "true"}, ""});
  REQUIRE(plain.mode() == Mode::kStatic);
  CHECK(std::get<NodePlan>(plain.run).layout.node_list.empty());
  // Without --node-rank a list is still a head launch.
  CHECK(MustDecide({"", {}, {"-H", "a,b", "--", "true"}, ""}).mode() == Mode::kHead);
  // A list of the wrong length is named.
  Result<Options> o = ParseCommandLine({"--nnodes", "3", "--node-rank", "0", "-H", "a,b", "--", "true"}, {});
  REQUIRE(o.ok());
  Result<Plan> bad = Decide(*o, envmap::Detect({}), MachineFacts{"here", 2, {}, "x"}, {});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "-H: 2 host(s), but --nnodes is 3");
}

TEST_CASE("--explain says where each value came from", "[plan]") {
  Plan p = MustDecide({"", kSlurm, {"--explain", "--", "true"}, ""});
  std::string text = Explain(p);
  CHECK(text.find("where each value came from:\n") != std::string::npos);
  CHECK(text.find("  rendezvous endpoint: n1:29400 (slurm)\n") != std::string::npos);
  CHECK(text.find("  nodes: 4 (slurm)\n") != std::string::npos);
}

}  // namespace
}  // namespace dlaunch::launcher

namespace dlaunch::launcher {
namespace {

TEST_CASE("Decide: TF roles across nodes, each node its share in node-rank order", "[plan]") {
  Plan even =
      MustDecide({"", {}, {"--nnodes", "2", "--rdzv-endpoint", "h:1", "--roles", "chief:1,worker:3", "--", "t"}, ""});
  CHECK(even.workers()->nproc == 2);
  CHECK(even.workers()->roles.size() == 2);
  Plan given = MustDecide(
      {"",
       {},
       {"--nnodes", "3", "--nproc-per-node", "1", "--rdzv-endpoint", "h:1", "--roles", "worker:1,ps:2", "--", "t"},
       ""});
  CHECK(given.workers()->nproc == 1);
  Plan one = MustDecide({"", {}, {"--roles", "chief:1,worker:2,ps:1", "--", "t"}, ""});
  CHECK(one.workers()->nproc == 4);
}

}  // namespace
}  // namespace dlaunch::launcher

namespace dlaunch::launcher {
namespace {

// The coordinator daemon's row: `dlaunch coordinator ...` decides a DaemonPlan.
TEST_CASE("DecideDaemon: the listen address, every job's timeouts and token; other flags refused", "[plan]") {
  Result<DaemonPlan> d = DecideDaemon({"--listen", "10.0.0.1", "--rdzv_conf=heartbeat_timeout=3,join_timeout=60"},
                                      {{"DLAUNCH_RDZV_TOKEN", "s3cret"}});
  INFO(d.status().message());
  REQUIRE(d.ok());
  CHECK(d->listen.ToString() == "10.0.0.1:29400");
  CHECK(d->jobs.endpoint == "10.0.0.1:29400");
  CHECK(d->jobs.heartbeat_timeout == std::chrono::seconds(3));
  CHECK(d->jobs.join_timeout == std::chrono::seconds(60));
  CHECK(d->jobs.token == "s3cret");
  rendezvous::Hello hello;
  hello.run_id = "job42";
  hello.min_nodes = 2;
  hello.max_nodes = 4;
  hello.max_restarts = 1;
  hello.hang_timeout_ms = 600000;
  hello.hang_stop = 1;
  rendezvous::CoordinatorOptions job = JobFor(*d, hello);
  CHECK((job.run_id == "job42" && job.min_nodes == 2 && job.max_nodes == 4 && job.max_restarts == 1));
  CHECK((job.hang_timeout == std::chrono::minutes(10) && job.hang_stop));
  CHECK(job.heartbeat_timeout == std::chrono::seconds(3));

  auto error = [](std::vector<std::string> args) {
    Result<DaemonPlan> p = DecideDaemon(args, {});
    REQUIRE_FALSE(p.ok());
    return p.status().message();
  };
  CHECK(error({"--rdzv-conf", "join_timeout=5"}) == "--listen: required (ADDR:PORT)");
  CHECK(error({"--listen", "h:1", "--nproc-per-node", "2"}) ==
        "'--nproc-per-node' is not a coordinator flag (--listen, --rdzv-token, --rdzv-token-file, --rdzv-conf, "
        "--metrics-addr)");
  CHECK(error({"--listen"}) == "--listen: expects a value");
}

}  // namespace
}  // namespace dlaunch::launcher

namespace dlaunch::launcher {

TEST_CASE("-np: horovodrun's spelling fills the hosts' slots in order", "[plan][np]") {
  auto head = [](std::vector<std::string> args) {
    Plan p = MustDecide({"", {}, std::move(args), ""});
    REQUIRE(std::holds_alternative<HeadPlan>(p.run));
    return std::get<HeadPlan>(p.run);
  };
  // horovodrun -np 8 -H h1:4,h2:4 python train.py: the command as given, 4 + 4.
  HeadPlan h = head({"-np", "8", "-H", "h1:4,h2:4", "python", "train.py"});
  CHECK(h.workers == std::vector<std::string>{"4", "4"});
  CHECK(h.command == std::vector<std::string>{"--", "python", "train.py"});
  // Fewer processes than slots: the first host fills first; an unused host goes.
  h = head({"-np", "5", "-H", "h1:4,h2:4,h3:4", "python", "train.py"});
  CHECK(h.workers == std::vector<std::string>{"4", "1"});
  REQUIRE(h.hosts.size() == 2);
  CHECK(h.hosts[1].host == "h2");
  // A host without a count has one slot, as in horovodrun and mpirun; -np=N too.
  h = head({"-np=2", "-H", "h1,h2", "python", "train.py"});
  CHECK(h.workers == std::vector<std::string>{"1", "1"});
}

TEST_CASE("-np without a node list runs them all here, the command as given", "[plan][np]") {
  Plan p = MustDecide({"", {}, {"-np", "3", "python", "train.py"}, ""});
  const WorkerPlan& w = *p.workers();
  CHECK(w.nproc == 3);
  CHECK(w.argv == std::vector<std::string>{"python", "train.py"});
}

TEST_CASE("-np refusals", "[plan][np]") {
  auto error = [](std::vector<std::string> args) {
    Result<Options> o = ParseCommandLine(args, {});
    if (!o.ok()) return o.status().message();
    Result<Plan> p = Decide(*o, envmap::Detect({}), MachineFacts{"here", 2, {}, "x"}, {});
    REQUIRE_FALSE(p.ok());
    return p.status().message();
  };
  CHECK(error({"-np", "9", "-H", "h1:4,h2:4", "python", "t.py"}) ==
        "-np: 9 processes, but the 2 host(s) of -H have 8 slot(s) in all");
  CHECK(error({"-np", "0", "python", "t.py"}) == "--np: expected a positive number of processes, got '0'");
  CHECK(error({"-np", "2", "--nproc-per-node", "2", "python", "t.py"}) ==
        "-np: counts the whole job's processes; give it or --nproc-per-node, not both");
  CHECK(error({"-np", "70000", "python", "t.py"}) ==
        "-np: 70000 processes on this node is over the limit of 65536 (give the hosts with -H or --hostfile)");
}

}  // namespace dlaunch::launcher

namespace dlaunch::launcher {
namespace {

TEST_CASE("--virtual-local-rank: each local rank needs its entry of CUDA_VISIBLE_DEVICES", "[plan][virtual]") {
  auto decide = [](EnvMap env, std::vector<std::string> args) {
    Result<Options> o = ParseCommandLine(args, env);
    REQUIRE(o.ok());
    return Decide(*o, envmap::Detect(env), MachineFacts{"here", 2, {}, "x"}, env);
  };
  Result<Plan> ok =
      decide({{"CUDA_VISIBLE_DEVICES", "4,5"}}, {"--virtual-local-rank", "--nproc-per-node", "2", "--", "t"});
  REQUIRE(ok.ok());
  CHECK(ok->workers()->flavors.virtual_local_rank);
  // Unset: torch 2.x gives local rank N GPU N.
  REQUIRE(decide({}, {"--virtual-local-rank", "--nproc-per-node", "3", "--", "t"}).ok());
  Result<Plan> short_list =
      decide({{"CUDA_VISIBLE_DEVICES", "4,5"}}, {"--virtual-local-rank", "--nproc-per-node", "3", "--", "t"});
  REQUIRE_FALSE(short_list.ok());
  CHECK(short_list.status().message() ==
        "--virtual-local-rank: local rank 2 has no GPU in CUDA_VISIBLE_DEVICES=4,5 (2 for 3 workers)");
  Result<Plan> per_node = decide({}, {"--virtual-local-rank", "--launch-mode", "per-node", "--", "t"});
  REQUIRE_FALSE(per_node.ok());
  CHECK(per_node.status().message().starts_with("--virtual-local-rank: not with --launch-mode per-node"));
  // Without the flag nothing changes.
  CHECK_FALSE(decide({}, {"--nproc-per-node", "2", "--", "t"})->workers()->flavors.virtual_local_rank);
}

}  // namespace
}  // namespace dlaunch::launcher
