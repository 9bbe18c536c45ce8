#include "launcher/config/cli.hpp"

#include <algorithm>

#include <catch2/catch.hpp>

using dlaunch::envmap::EnvMap;
using dlaunch::launcher::FlagNames;
using dlaunch::launcher::ForAgents;
using dlaunch::launcher::HeadOnly;
using dlaunch::launcher::NprocKind;
using dlaunch::launcher::Options;
using dlaunch::launcher::ParseCommandLine;
using dlaunch::launcher::StdFor;

namespace {
Options MustParse(std::vector<std::string> args, const EnvMap& env = {}) {
  auto r = ParseCommandLine(args, env);
  INFO(r.status().message());
  REQUIRE(r.ok());
  return *r;
}

std::string CliError(std::vector<std::string> args, const EnvMap& env = {}) {
  auto r = ParseCommandLine(args, env);
  REQUIRE_FALSE(r.ok());
  return r.status().message();
}
}  // namespace

TEST_CASE("both spellings and both value forms give the same flag", "[cli]") {
  for (auto args : std::vector<std::vector<std::string>>{{"--nproc-per-node", "4", "train.py"},
                                                         {"--nproc_per_node", "4", "train.py"},
                                                         {"--nproc-per-node=4", "train.py"},
                                                         {"--nproc_per_node=4", "train.py"}}) {
    Options o = MustParse(args);
    CHECK(o.nproc == 4);
    CHECK(o.nproc_kind == NprocKind::kNumber);
    CHECK(o.command == std::vector<std::string>{"train.py"});
    CHECK_FALSE(o.after_dashdash);
  }
}

TEST_CASE("the first positional ends flag parsing; its args belong to the script", "[cli]") {
  Options o = MustParse({"--nnodes=1", "train.py", "--nproc-per-node", "9", "--", "x"});
  CHECK(o.nproc == 1);
  CHECK(o.command == std::vector<std::string>{"train.py", "--nproc-per-node", "9", "--", "x"});
}

TEST_CASE("after -- the command runs as given", "[cli]") {
  Options o = MustParse({"--nproc-per-node", "2", "--", "python", "-u", "t.py"});
  CHECK(o.after_dashdash);
  CHECK(o.command == std::vector<std::string>{"python", "-u", "t.py"});
  CHECK(o.nproc_kind == NprocKind::kNumber);
}

TEST_CASE("entrypoint form sizes the node itself; flags keep torchrun's default of 1", "[cli]") {
  CHECK(MustParse({"--", "python", "t.py"}).nproc_kind == NprocKind::kAuto);
  CHECK(MustParse({"--standalone", "--", "python", "t.py"}).nproc_kind == NprocKind::kNumber);
  CHECK(MustParse({"t.py"}).nproc_kind == NprocKind::kNumber);
}

TEST_CASE("nproc takes auto, gpu and cpu", "[cli]") {
  CHECK(MustParse({"--nproc-per-node", "auto", "t.py"}).nproc_kind == NprocKind::kAuto);
  CHECK(MustParse({"--nproc-per-node", "gpu", "t.py"}).nproc_kind == NprocKind::kGpu);
  CHECK(MustParse({"--nproc-per-node", "cpu", "t.py"}).nproc_kind == NprocKind::kCpu);
}

TEST_CASE("PET_ variables are flag defaults, and flags win over them", "[cli]") {
  EnvMap env = {{"PET_NPROC_PER_NODE", "3"}, {"PET_NNODES", "2"}, {"PET_STANDALONE", "1"}, {"PET_NODE_RANK", "1"}};
  Options o = MustParse({"t.py"}, env);
  CHECK(o.min_nodes == 2);
  CHECK(o.max_nodes == 2);
  CHECK(o.node_rank == 1);
  CHECK(o.nproc == 3);
  CHECK(o.standalone);
  CHECK(MustParse({"--nproc_per_node=5", "t.py"}, env).nproc == 5);
  CHECK(CliError({"t.py"}, {{"PET_NPROC_PER_NODE", "x"}}) ==
        "--nproc-per-node: expected a positive number, 'auto', 'gpu' or 'cpu', got 'x' (from PET_NPROC_PER_NODE)");
}

TEST_CASE("python handling and legacy switches", "[cli]") {
  Options o = MustParse({"--no_python", "--use_env", "--legacy-launch", "--run-path", "x"});
  CHECK(o.no_python);
  CHECK(o.use_env);
  CHECK(o.legacy_launch);
  CHECK(o.run_path);
  CHECK(MustParse({"-m", "pkg.train"}).module);
  CHECK(CliError({"-m", "--no-python", "x"}) == "--module: cannot be combined with --no-python");
}

TEST_CASE("short flags take attached or separate values", "[cli]") {
  Options o = MustParse({"-r", "3", "-t1", "--log-dir", "/tmp/x", "t.py"});
  CHECK(o.redirects == "3");
  CHECK(o.tee == "1");
  CHECK(o.log_dir == "/tmp/x");
}

TEST_CASE("roles and role-env", "[cli]") {
  Options o = MustParse({"--roles", "chief:1,worker:2,ps:1", "--role-env", "ps:MAGIC=new=number", "--", "t"});
  REQUIRE(o.roles.size() == 3);
  CHECK(o.roles[1].name == "worker");
  CHECK(o.roles[1].count == 2);
  REQUIRE(o.roles[2].env.size() == 1);
  CHECK(o.roles[2].env[0].first == "MAGIC");
  CHECK(o.roles[2].env[0].second == "new=number");
}

TEST_CASE("an agent of a head launch takes --role-env values from DLAUNCH_ROLE_ENV_<i>", "[cli]") {
  Options o = MustParse({"--roles", "ps:1,worker:1", "--role-env", "worker:W=flag", "--", "t"},
                        {{"DLAUNCH_ROLE_ENV_0", "ps:A=1"},
                         {"DLAUNCH_ROLE_ENV_1", "ps:B=x y\nz"},
                         {"DLAUNCH_ROLE_ENV_3", "ps:C=after a gap"}});
  REQUIRE(o.roles.size() == 2);
  CHECK(o.roles[0].env == std::vector<std::pair<std::string, std::string>>{{"A", "1"}, {"B", "x y\nz"}});
  CHECK(o.roles[1].env == std::vector<std::pair<std::string, std::string>>{{"W", "flag"}});
  // Never forwarded again: a head's own agents get them from the head's flags.
  std::vector<std::string> forwarded = AgentFlags(o);
  CHECK(std::find(forwarded.begin(), forwarded.end(), "ps:A=1") == forwarded.end());

  auto bad = ParseCommandLine({"--roles", "ps:1", "--", "t"}, {{"DLAUNCH_ROLE_ENV_0", "nope:A=1"}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "--role-env: role 'nope' is not in --roles (give --roles first) (from DLAUNCH_ROLE_ENV_0)");
}

TEST_CASE("tag-output takes an optional =FORMAT", "[cli]") {
  CHECK(*MustParse({"--tag-output", "t.py"}).tag_format == "[{node_rank},{rank}]<{stream}>: ");
  CHECK(*MustParse({"--tag-output={rank}|", "t.py"}).tag_format == "{rank}|");
  CHECK_FALSE(MustParse({"t.py"}).tag_format.has_value());
}

TEST_CASE("every bad input names the flag and the value", "[cli]") {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Case> cases = {
      {{"--nproc-per-node", "0", "t.py"},
       "--nproc-per-node: expected a positive number, 'auto', 'gpu' or 'cpu', got '0'"},
      {{"--nproc-per-node", "-3", "t.py"},
       "--nproc-per-node: expected a positive number, 'auto', 'gpu' or 'cpu', got '-3'"},
      {{"--nproc-per-node", "abc", "t.py"},
       "--nproc-per-node: expected a positive number, 'auto', 'gpu' or 'cpu', got 'abc'"},
      {{"--nproc-per-node=4x", "t.py"},
       "--nproc-per-node: expected a positive number, 'auto', 'gpu' or 'cpu', got '4x'"},
      {{"--nproc-per-nodes", "2", "t.py"}, "unknown flag '--nproc-per-nodes' (did you mean '--nproc-per-node'?)"},
      {{"--nproc_per_nodes=2", "t.py"}, "unknown flag '--nproc_per_nodes' (did you mean '--nproc-per-node'?)"},
      {{"--zzzzzzzzzz", "t.py"}, "unknown flag '--zzzzzzzzzz'"},
      {{"-q", "t.py"}, "unknown flag '-q'"},
      {{"--nproc-per-node"}, "--nproc-per-node: expects a value"},
      {{"--nproc-per-node", "2"}, "no command to run (usage: dlaunch [flags] -- COMMAND [ARGS...])"},
      {{"--nproc-per-node", "2", "--"}, "no command to run (usage: dlaunch [flags] -- COMMAND [ARGS...])"},
      {{"--nnodes", "3:2", "t.py"}, "--nnodes: expected N or MIN:MAX with 1 <= MIN <= MAX, got '3:2'"},
      {{"--master-port", "70000", "t.py"}, "--master-port: expected a port from 1 to 65535, got '70000'"},
      {{"--max-restarts", "-1", "t.py"}, "--max-restarts: expected a number >= 0, got '-1'"},
      {{"--shutdown-timeout", "soon", "t.py"}, "--shutdown-timeout: expected seconds from 0 to 2592000, got 'soon'"},
      {{"--tee", "7", "t.py"}, "--tee: expected 0-3 or a map like '0:1,1:2', got '7'"},
      {{"--redirects", "0:x", "t.py"}, "--redirects: expected 0-3 or a map like '0:1,1:2', got '0:x'"},
      {{"--local-ranks-filter", "0,a", "t.py"}, "--local-ranks-filter: expected local ranks like '0,2', got '0,a'"},
      {{"--signals-to-handle", "SIGNOPE", "t.py"},
       "--signals-to-handle: expected signal names like 'SIGTERM,SIGINT', got 'SIGNOPE'"},
      {{"--env", "mpich", "t.py"}, "--env: expected a list of ompi, azure, horovod, tf, got 'mpich'"},
      {{"--roles", "chief:0", "t.py"},
       "--roles: expected ROLE:COUNT pairs like 'chief:1,worker:2,ps:1', got 'chief:0'"},
      {{"--role-env", "ps:MAGIC=1", "t.py"}, "--role-env: role 'ps' is not in --roles (give --roles first)"},
      {{"--roles", "ps:1", "--role-env", "ps=1", "t.py"}, "--role-env: expected ROLE:NAME=VALUE, got 'ps=1'"},
      {{"--bind-to", "socket", "t.py"}, "--bind-to: expected none, core or numa, got 'socket'"},
      {{"--nnodes", "2", "--roles", "worker:2", "t.py"},
       "--roles: across nodes the tasks meet through the rendezvous; give --rdzv-endpoint, or a node list (-H, "
       "--hostfile) without one"},
      {{"--nnodes", "2:3", "--rdzv-endpoint", "h:1", "--roles", "worker:2", "t.py"},
       "--roles: needs a fixed node count, got --nnodes 2:3"},
      {{"--nnodes", "2", "--rdzv-endpoint", "h:1", "--roles", "worker:3", "t.py"},
       "--roles: 3 tasks do not split evenly over 2 nodes; give each node's --nproc-per-node"},
      {{"--nnodes", "2", "--nproc-per-node", "2", "--rdzv-endpoint", "h:1", "--roles", "worker:3", "t.py"},
       "--roles: counts add up to 3 but 2 nodes of --nproc-per-node 2 make 4"},
      {{"--standalone=1", "t.py"}, "--standalone: takes no value, got '1'"},
      {{"--legacy-launch", "--no-python", "x"},
       "--no-python: needs --use-env under --legacy-launch (the worker cannot take --local-rank)"},
      {{"--nnodes", "2", "--node-rank", "2", "t.py"}, "--node-rank: 2 is outside the job's 2 node(s)"},
      {{"--nnodes", "2:4", "t.py"}, "--nnodes: elastic 2:4 needs --rdzv-endpoint"},
      {{"--rdzv-conf", "is_host=2", "t.py"}, "--rdzv-conf: expected is_host=0 or is_host=1, got 'is_host=2'"},
      {{"--rdzv-conf", "join_timeout=-1", "t.py"},
       "--rdzv-conf: expected join_timeout=SECONDS (positive, at most 2592000), got 'join_timeout=-1'"},
      {{"--nodes", "a,,b", "t.py"}, "--nodes: expected a list of hosts like 'n1,n2', got 'a,,b'"},
  };
  for (const Case& c : cases) {
    INFO(c.args[0]);
    CHECK(CliError(c.args) == c.message);
  }
}

TEST_CASE("rdzv-conf keys set the rendezvous timeouts", "[cli]") {
  Options o = MustParse({"--nnodes", "2:3", "--rdzv-endpoint", "h:1", "--rdzv_conf",
                         "is_host=1,join_timeout=5,last_call_timeout=0.5,heartbeat_timeout=2,read_timeout=9", "t.py"});
  CHECK(o.is_host == std::optional<bool>(true));
  CHECK(o.join_timeout == std::chrono::milliseconds(5000));
  CHECK(o.last_call_timeout == std::chrono::milliseconds(500));
  CHECK(o.heartbeat_timeout == std::chrono::milliseconds(2000));
  CHECK(o.min_nodes == 2);
  CHECK(o.max_nodes == 3);
}

TEST_CASE("Std specs: one value for all, or per local rank", "[cli]") {
  CHECK(StdFor("3", 5) == 3);
  CHECK(StdFor("0:1,1:2", 0) == 1);
  CHECK(StdFor("0:1,1:2", 1) == 2);
  CHECK(StdFor("0:1,1:2", 2) == 0);
  CHECK(StdFor("4", 0) == -1);
  CHECK(StdFor("0:", 0) == -1);
}

TEST_CASE("counts, sizes and durations are bounded", "[cli][bounds]") {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Case> cases = {
      {{"--nproc-per-node", "2147483647", "t.py"},
       "--nproc-per-node: 2147483647 is over the limit of 65536 workers per node"},
      {{"--nproc-per-node", "65537", "t.py"}, "--nproc-per-node: 65537 is over the limit of 65536 workers per node"},
      {{"--nproc-per-node", "99999999999", "t.py"},
       "--nproc-per-node: expected a positive number, 'auto', 'gpu' or 'cpu', got '99999999999'"},
      {{"--roles", "worker:1073741824,ps:1073741824", "t.py"},
       "--roles: 2147483648 workers in all is over the limit of 65536 workers per node"},
      {{"--roles", "worker:65536,ps:1", "t.py"},
       "--roles: 65537 workers in all is over the limit of 65536 workers per node"},
      {{"--nnodes", "1048577", "t.py"}, "--nnodes: 1048577 is over the limit of 1048576 nodes"},
      {{"--nnodes", "1:2000000000", "--rdzv-endpoint", "h:1", "t.py"},
       "--nnodes: 2000000000 is over the limit of 1048576 nodes"},
      {{"--nnodes", "1048576", "--nproc-per-node", "65536", "t.py"},
       "--nproc-per-node: 1048576 nodes of 65536 workers make 68719476736, over the limit of 2147483647 in a job"},
      {{"--shutdown-timeout", "inf", "t.py"}, "--shutdown-timeout: expected seconds from 0 to 2592000, got 'inf'"},
      {{"--shutdown-timeout", "nan", "t.py"}, "--shutdown-timeout: expected seconds from 0 to 2592000, got 'nan'"},
      {{"--shutdown-timeout", "1e300", "t.py"}, "--shutdown-timeout: expected seconds from 0 to 2592000, got '1e300'"},
      {{"--shutdown-timeout", "-0.5", "t.py"}, "--shutdown-timeout: expected seconds from 0 to 2592000, got '-0.5'"},
      {{"--rdzv-conf", "join_timeout=inf", "t.py"},
       "--rdzv-conf: expected join_timeout=SECONDS (positive, at most 2592000), got 'join_timeout=inf'"},
      {{"--rdzv-conf", "heartbeat_timeout=nan", "t.py"},
       "--rdzv-conf: expected heartbeat_timeout=SECONDS (positive, at most 2592000), got 'heartbeat_timeout=nan'"},
      {{"--rdzv-conf", "last_call_timeout=2592001", "t.py"},
       "--rdzv-conf: expected last_call_timeout=SECONDS (positive, at most 2592000), got 'last_call_timeout=2592001'"},
      {{"--rdzv-conf", "join_timeout=0", "t.py"},
       "--rdzv-conf: expected join_timeout=SECONDS (positive, at most 2592000), got 'join_timeout=0'"},
  };
  for (const Case& c : cases) {
    INFO(c.args[0] << " " << c.args[1]);
    CHECK(CliError(c.args) == c.message);
  }
  // The limits themselves are allowed; a tiny positive timeout stays positive.
  CHECK(MustParse({"--nproc-per-node", "65536", "t.py"}).nproc == 65536);
  CHECK(MustParse({"--nnodes", "1048576", "t.py"}).max_nodes == 1048576);
  CHECK(MustParse({"--shutdown-timeout", "2592000", "t.py"}).shutdown_timeout == std::chrono::hours(720));
  CHECK(MustParse({"--shutdown-timeout", "0", "t.py"}).shutdown_timeout == std::chrono::milliseconds(0));
  CHECK(MustParse({"--rdzv-conf", "join_timeout=0.0001", "t.py"}).join_timeout == std::chrono::milliseconds(1));
}

TEST_CASE("rendezvous identity and configuration are checked up front", "[cli][bounds]") {
  CHECK(CliError({"--rdzv-token", "", "t.py"}) == "--rdzv-token: empty token");
  CHECK(CliError({"--rdzv-token=", "t.py"}) == "--rdzv-token: empty token");
  CHECK(CliError({"t.py"}, {{"PET_RDZV_TOKEN", ""}}) == "--rdzv-token: empty token (from PET_RDZV_TOKEN)");
  CHECK(CliError({"--rdzv-id", std::string(1025, 'x'), "t.py"}) == "--rdzv-id: 1025 bytes is over the limit of 1024");
  CHECK(MustParse({"--rdzv-id", std::string(1024, 'x'), "t.py"}).rdzv_id.size() == 1024);
  CHECK(CliError({"--rdzv-conf", "join_timout=5", "t.py"}) ==
        "--rdzv-conf: unknown key 'join_timout' (did you mean 'join_timeout'?)");
  CHECK(CliError({"--rdzv-conf", "is_hots=1", "t.py"}) ==
        "--rdzv-conf: unknown key 'is_hots' (did you mean 'is_host'?)");
  // torchrun's own c10d and etcd keys are still accepted, and ignored.
  MustParse({"--rdzv-conf", "read_timeout=9,timeout=9,close_timeout=1,keep_alive_interval=5,use_libuv=1", "t.py"});
}

TEST_CASE("--roles against --nproc-per-node is checked by the parser, so --explain refuses too", "[cli][bounds]") {
  CHECK(CliError({"--roles", "chief:1,worker:1", "--nproc-per-node", "3", "--explain"}) ==
        "--roles: counts add up to 2 but --nproc-per-node is 3");
  CHECK(CliError({"--nproc-per-node", "3", "--roles", "chief:1,worker:1", "t.py"}) ==
        "--roles: counts add up to 2 but --nproc-per-node is 3");
  MustParse({"--nproc-per-node", "2", "--roles", "chief:1,worker:1", "--explain"});
  MustParse({"--nproc-per-node", "auto", "--roles", "chief:1,worker:1", "t.py"});
}

TEST_CASE("--nodes names each host once, as -H and hostfiles do", "[cli][bounds]") {
  CHECK(CliError({"--nodes", "n1,n2,n1", "t.py"}) == "--nodes: host 'n1' is listed twice (node ranks 0 and 2)");
  CHECK(CliError({"--nodes", "[::1],::1", "t.py"}) == "--nodes: host '::1' is listed twice (node ranks 0 and 1)");
  CHECK(MustParse({"--nodes", "[fe80::1],n2", "t.py"}).nodes == std::vector<std::string>{"fe80::1", "n2"});
}

TEST_CASE("each flag is either passed on to a head launch's agents or the head's own, never both", "[cli]") {
  std::vector<std::string> names = FlagNames();
  REQUIRE(names.size() > 40);
  for (const std::string& name : names) {
    INFO("--" << name);
    CHECK(ForAgents(name) != HeadOnly(name));
  }
  // The lists name real flags only.
  CHECK_FALSE(ForAgents("no-such-flag"));
  CHECK_FALSE(HeadOnly("no-such-flag"));
}

TEST_CASE("AgentFlags carries exactly the flags an agent needs, as typed", "[cli]") {
  Options o = MustParse({"-H", "a,b", "--nproc-per-node", "2", "--max-restarts=3", "--tee", "1", "--no-tag",
                         "--rdzv-conf", "join_timeout=5", "--", "true"});
  CHECK(AgentFlags(o) ==
        std::vector<std::string>{"--max-restarts", "3", "--tee", "1", "--rdzv-conf", "join_timeout=5"});
}

namespace dlaunch::launcher {
namespace {

TEST_CASE("torchrun 2.x flags dlaunch does not take are refused in one line naming what to use", "[cli][torchrun2]") {
  auto error = [](std::vector<std::string> args, envmap::EnvMap env = {}) {
    Result<Options> o = ParseCommandLine(args, env);
    REQUIRE_FALSE(o.ok());
    return o.status().message();
  };
  CHECK(error({"--numa-binding", "node", "t.py"}) ==
        "--numa-binding: not supported (a torchrun 2.x flag); use --bind-to numa (CPUs of NUMA node LOCAL_RANK % "
        "nodes), or numactl --cpunodebind=N --membind=N before the command");
  CHECK(error({"--numa_binding=exclusive", "t.py"}).starts_with("--numa-binding: not supported"));
  // A prefix of a refused flag gets the refusal, as the whole name does.
  CHECK(error({"--numa", "node", "t.py"}).starts_with("--numa-binding: not supported"));
  CHECK(error({"--duplicate-stdout-filters", "loss,acc", "t.py"}) ==
        "--duplicate-stdout-filters: not supported (a torchrun 2.x flag); use --tee 1 --log-dir DIR and grep "
        "DIR/RUN_ID/attempt_N/*/stdout.log");
  CHECK(error({"--duplicate_stderr_filters=NCCL", "t.py"}) ==
        "--duplicate-stderr-filters: not supported (a torchrun 2.x flag); use --tee 2 --log-dir DIR and grep "
        "DIR/RUN_ID/attempt_N/*/stderr.log");
  CHECK(error({"--event-log-handler", "console", "t.py"}) ==
        "--event-log-handler: not supported (a torchrun 2.x flag); use --events FILE (the job's events, one JSON "
        "object per line)");
  // torchrun takes PET_<FLAG> as the flag's default: refused the same way.
  CHECK(error({"t.py"}, {{"PET_NUMA_BINDING", "node"}}) ==
        "--numa-binding: not supported (a torchrun 2.x flag); use --bind-to numa (CPUs of NUMA node LOCAL_RANK % "
        "nodes), or numactl --cpunodebind=N --membind=N before the command (from PET_NUMA_BINDING)");
  // After the script they are the script's own.
  Result<Options> o = ParseCommandLine({"t.py", "--numa-binding", "node"}, {});
  REQUIRE(o.ok());
  // A near miss of a real flag still gets a suggestion.
  CHECK(error({"--virtual-local-ranks", "t.py"}) ==
        "unknown flag '--virtual-local-ranks' (did you mean '--virtual-local-rank'?)");
}

}  // namespace
}  // namespace dlaunch::launcher
