// torchrun's own command lines, run through dlaunch's parser and Decide: each
// row is a difference that once made dlaunch a poor drop-in for torchrun.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/config/cli.hpp"
#include "launcher/config/plan.hpp"
#include "launcher/config/torchrun_flags.hpp"

// A namespace of its own: the unit tests build as one unity file per layer.
namespace dlaunch::launcher::torchrun_compat_test {
namespace {

using envmap::EnvMap;

Options MustParse(std::vector<std::string> args, const EnvMap& env = {}) {
  Result<Options> r = ParseCommandLine(args, env);
  INFO(r.status().message());
  REQUIRE(r.ok());
  return *r;
}

std::string CliError(std::vector<std::string> args, const EnvMap& env = {}) {
  Result<Options> r = ParseCommandLine(args, env);
  REQUIRE_FALSE(r.ok());
  return r.status().message();
}

// A machine with 16 online CPUs and `gpus` GPUs.
MachineFacts Machine(int gpus) {
  MachineFacts facts{"here", 16, {}, "fresh"};
  for (int i = 0; i < gpus; ++i) facts.gpus.push_back(std::to_string(i));
  return facts;
}

Result<Plan> DecideFor(std::vector<std::string> args, const MachineFacts& facts, const EnvMap& env = {}) {
  Result<Options> o = ParseCommandLine(args, env);
  if (!o.ok()) return o.status();
  return Decide(*o, envmap::Detect(env), facts, env);
}

Plan MustDecide(std::vector<std::string> args, const MachineFacts& facts, const EnvMap& env = {}) {
  Result<Plan> p = DecideFor(std::move(args), facts, env);
  INFO(p.status().message());
  REQUIRE(p.ok());
  return *p;
}

std::string OriginOf(const Plan& p, std::string_view what) {
  for (const auto& o : p.origins)
    if (o.what == what) return fmt::format("{} ({})", o.value, o.from);
  return "";
}

}  // namespace

TEST_CASE("--nproc-per-node auto, cpu and gpu count as torchrun's do", "[torchrun][nproc]") {
  struct Row {
    std::vector<std::string> args;
    int gpus;
    std::string want;  // the --explain origin line, or the error
  };
  std::vector<Row> rows = {
      // torchrun: auto without CUDA is os.cpu_count(), not 1.
      {{"--nproc-per-node", "auto", "t.py"},
       0,
       "16 (--nproc-per-node auto: no GPU visible, so os.cpu_count(): 16 online CPU(s), as torchrun)"},
      {{"--nproc_per_node", "auto", "t.py"},
       0,
       "16 (--nproc-per-node auto: no GPU visible, so os.cpu_count(): 16 online CPU(s), as torchrun)"},
      {{"--nproc_per_node=auto", "t.py"}, 2, "2 (--nproc-per-node auto: 2 visible GPU(s))"},
      {{"--nproc-per-node", "cpu", "t.py"},
       2,
       "16 (--nproc-per-node cpu: os.cpu_count(): 16 online CPU(s), as torchrun)"},
      {{"--nproc-per-node", "gpu", "t.py"}, 4, "4 (--nproc-per-node gpu: 4 visible GPU(s))"},
      {{"--nproc-per-node", "gpu", "t.py"}, 0, "--nproc-per-node: 'gpu' given but no GPU is visible"},
      // dlaunch's own default, no flag in the entrypoint form: one per GPU, else 1.
      {{"--", "python3", "t.py"}, 0, "1 (the visible GPUs (auto))"},
      {{"--", "python3", "t.py"}, 3, "3 (the visible GPUs (auto))"},
      {{"t.py"}, 0, "1 (default)"},
  };
  for (const Row& row : rows) {
    INFO(fmt::format("{} with {} GPU(s)", fmt::join(row.args, " "), row.gpus));
    Result<Plan> p = DecideFor(row.args, Machine(row.gpus));
    CHECK((p.ok() ? OriginOf(*p, "workers per node") : p.status().message()) == row.want);
  }
  // PET_NPROC_PER_NODE=auto is torchrun's default of the flag: the same count.
  CHECK(MustDecide({"t.py"}, Machine(0), {{"PET_NPROC_PER_NODE", "auto"}}).workers()->nproc == 16);
  // --explain shows the count and why.
  std::string explained = Explain(MustDecide({"--nproc-per-node", "auto", "--explain", "t.py"}, Machine(0)));
  CHECK_THAT(explained, Catch::Contains("workers on this node: 16\n"));
  CHECK_THAT(explained,
             Catch::Contains("workers per node: 16 (--nproc-per-node auto: no GPU visible, so os.cpu_count()"));
}

TEST_CASE("--rdzv-conf: unknown keys are ignored with one line, near misses refused", "[torchrun][rdzv-conf]") {
  Options o = MustParse({"--rdzv-conf", "join_timeout=5,store_path=/x,backend_opt=1", "t.py"});
  CHECK(o.join_timeout == std::chrono::seconds(5));
  CHECK(o.warnings ==
        std::vector<std::string>{
            "--rdzv-conf: ignoring keys 'store_path', 'backend_opt' (dlaunch reads is_host, join_timeout, "
            "last_call_timeout, heartbeat_timeout)"});
  CHECK(MustParse({"--rdzv-conf", "zzzzzzzz=1", "t.py"}).warnings ==
        std::vector<std::string>{"--rdzv-conf: ignoring key 'zzzzzzzz' (dlaunch reads is_host, join_timeout, "
                                 "last_call_timeout, heartbeat_timeout)"});
  // torchrun's own backends' keys: ignored without a word.
  CHECK(MustParse({"--rdzv-conf", "read_timeout=9,timeout=9,close_timeout=1,keep_alive_interval=5,use_libuv=1", "t.py"})
            .warnings.empty());
  // A near miss of a key dlaunch reads would change the job if ignored.
  CHECK(CliError({"--rdzv-conf", "is_hots=1", "t.py"}) ==
        "--rdzv-conf: unknown key 'is_hots' (did you mean 'is_host'?)");
  CHECK(CliError({"--rdzv-conf", "join_timout=5", "t.py"}) ==
        "--rdzv-conf: unknown key 'join_timout' (did you mean 'join_timeout'?)");
  CHECK(CliError({"--rdzv-conf", "hearbeat_timeout=5", "t.py"}) ==
        "--rdzv-conf: unknown key 'hearbeat_timeout' (did you mean 'heartbeat_timeout'?)");
  CHECK(CliError({"t.py"}, {{"PET_RDZV_CONF", "is_hots=1"}}) ==
        "--rdzv-conf: unknown key 'is_hots' (did you mean 'is_host'?) (from PET_RDZV_CONF)");
}

TEST_CASE("--rdzv-conf: one pair of quotes around the whole value goes", "[torchrun][rdzv-conf]") {
  // Exec-form YAML (args: ["--rdzv-conf='join_timeout=5,timeout=5'"]) passes the
  // quotes on: no shell removes them.
  for (std::vector<std::string> args : {std::vector<std::string>{"--rdzv-conf='join_timeout=5,timeout=5'", "t.py"},
                                        {"--rdzv_conf", "\"join_timeout=5,timeout=5\"", "t.py"}}) {
    INFO(args[0]);
    Options o = MustParse(args);
    CHECK(o.join_timeout == std::chrono::seconds(5));
    CHECK(o.warnings.empty());
  }
  // Only a matching pair around the whole value.
  CHECK(CliError({"--rdzv-conf='join_timeout=5\"", "t.py"}) ==
        "--rdzv-conf: unknown key ''join_timeout' (did you mean 'join_timeout'?)");
  CHECK(MustParse({"--rdzv-conf=''", "t.py"}).warnings.empty());
}

TEST_CASE("--redirects with --tee: a tee'd stream reaches the console, per stream and local rank", "[torchrun][tee]") {
  struct Row {
    std::vector<std::string> flags;
    std::vector<int> redirected;  // per local rank: the streams that go to files only
  };
  std::vector<Row> rows = {
      {{"--redirects", "3", "--tee", "3"}, {0, 0, 0}},
      {{"--redirects", "3", "--tee", "1"}, {2, 2, 2}},
      {{"--redirects", "3", "--tee", "2"}, {1, 1, 1}},
      {{"-r", "3", "-t", "0:3,1:1"}, {0, 2, 3}},
      {{"--redirects", "0:3,2:1", "--tee", "0:1,2:1"}, {2, 0, 0}},
      {{"--redirects", "2"}, {2, 2, 2}},
      {{"--tee", "3"}, {0, 0, 0}},
  };
  for (const Row& row : rows) {
    std::vector<std::string> args = {"--nproc-per-node", "3"};
    args.insert(args.end(), row.flags.begin(), row.flags.end());
    args.push_back("t.py");
    INFO(fmt::format("{}", fmt::join(args, " ")));
    Plan p = MustDecide(args, Machine(0));
    CHECK(p.workers()->redirected == row.redirected);
    CHECK(p.workers()->write_logs);
  }
}

TEST_CASE("a long flag may be an unambiguous prefix of one of torchrun's", "[torchrun][prefix]") {
  Options o = MustParse(
      {"--redirect", "3", "--nproc_per", "2", "--max_rest", "1", "--tee=1", "--rdzv-e=h:1", "--nnodes", "2", "t.py"});
  CHECK(o.redirects == "3");
  CHECK(o.nproc == 2);
  CHECK(o.max_restarts == 1);
  CHECK(o.rdzv_endpoint == "h:1");
  CHECK(MustParse({"--monitor-int", "5", "--start_meth", "fork", "--master_a=10.0.0.1", "t.py"}).master_addr ==
        "10.0.0.1");
  // An exact name always wins over the longer flags it begins.
  CHECK_FALSE(MustParse({"--no-python", "x"}).no_python_hook);
  CHECK(MustParse({"--no-python", "x"}).no_python);
  CHECK(MustParse({"--role", "w", "t.py"}).role == "w");
  // Ambiguity counts dlaunch's own flags too, and names every candidate.
  CHECK(CliError({"--node", "1", "t.py"}) == "ambiguous flag '--node' (could be --node-rank, --nodes)");
  CHECK(CliError({"--master=x", "t.py"}) == "ambiguous flag '--master' (could be --master-addr, --master-port)");
  CHECK(CliError({"--no-py", "x"}) == "ambiguous flag '--no-py' (could be --no-python, --no-python-hook)");
  CHECK(CliError({"--log", "d", "t.py"}) == "ambiguous flag '--log' (could be --log-dir, --logs-specs)");
  CHECK(CliError({"--=3", "t.py"}) == "unknown flag '--'");
  // dlaunch's own flags are not shortened.
  CHECK(CliError({"--hang-t", "5", "t.py"}) == "unknown flag '--hang-t' (did you mean '--hang-timeout'?)");
  // Never after the script or `--`: those words are the command's.
  CHECK(MustParse({"t.py", "--redirect", "3"}).command == std::vector<std::string>{"t.py", "--redirect", "3"});
  Options dashed = MustParse({"--", "x", "--nproc_per", "2"});
  CHECK(dashed.command == std::vector<std::string>{"x", "--nproc_per", "2"});
  CHECK(dashed.nproc == 1);
}

TEST_CASE("torchrun's flag lists: every 1.13 flag and the 2.x flags dlaunch takes are in the table",
          "[torchrun][prefix]") {
  for (auto list : {Torch113Flags(), Torch2Flags()}) {
    for (std::string_view f : list) {
      std::string dashed(f);
      for (char& c : dashed)
        if (c == '_') c = '-';
      INFO(dashed);
      CHECK(IsTorchrunFlag(dashed));
    }
  }
  for (std::string_view f : Torch113Flags()) {
    std::string dashed(f);
    for (char& c : dashed)
      if (c == '_') c = '-';
    INFO(dashed);
    std::vector<std::string> names = FlagNames();
    CHECK(std::find(names.begin(), names.end(), dashed) != names.end());
  }
}

TEST_CASE("--rdzv-backend etcd is refused at once, naming what to run instead", "[torchrun][etcd]") {
  const std::string want =
      "--rdzv-backend: '{}' is not supported: dlaunch speaks its own rendezvous, not etcd's; use --rdzv-backend c10d "
      "with --rdzv-endpoint HOST:PORT of a node (node rank 0 hosts it) or of `dlaunch coordinator`";
  CHECK(CliError({"--rdzv-backend", "etcd", "--rdzv-endpoint", "h:2379", "--nnodes", "2", "t.py"}) ==
        fmt::format(fmt::runtime(want), "etcd"));
  CHECK(CliError({"--rdzv_backend=etcd-v2", "--rdzv-endpoint", "h:2379", "t.py"}) ==
        fmt::format(fmt::runtime(want), "etcd-v2"));
  CHECK(CliError({"t.py"}, {{"PET_RDZV_BACKEND", "etcd-v2"}}) ==
        fmt::format(fmt::runtime(want), "etcd-v2") + " (from PET_RDZV_BACKEND)");
  CHECK(MustParse({"--rdzv-backend", "c10d", "t.py"}).rdzv_backend == "c10d");
  CHECK(MustParse({"--rdzv-backend", "static", "t.py"}).rdzv_backend == "static");
}

TEST_CASE("--logs-specs is known, and refused saying why", "[torchrun][logs-specs]") {
  const std::string want =
      "--logs-specs: 'mine' names a Python LogsSpecs plug-in, which dlaunch cannot load; use --log-dir, --redirects, "
      "--tee and --local-ranks-filter";
  CHECK(CliError({"--logs-specs", "mine", "t.py"}) == want);
  CHECK(CliError({"--logs_specs=mine", "t.py"}) == want);
  // torchrun reads no PET_LOGS_SPECS: neither does dlaunch.
  CHECK(MustParse({"t.py"}, {{"PET_LOGS_SPECS", "mine"}}).command == std::vector<std::string>{"t.py"});
}

TEST_CASE("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE sets the console tag unless a tag flag is typed", "[torchrun][tag]") {
  const EnvMap env = {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${role_name}:${rank}/$local_rank] "}};
  CHECK(MustDecide({"--nproc-per-node", "2", "t.py"}, Machine(0), env).workers()->tag_format ==
        std::optional<std::string>("[{role}:{rank}/{local_rank}] "));
  // One worker: torch's template still applies (dlaunch tags no single worker by default).
  CHECK(MustDecide({"t.py"}, Machine(0), env).workers()->tag_format ==
        std::optional<std::string>("[{role}:{rank}/{local_rank}] "));
  CHECK(MustDecide({"--nproc-per-node", "2", "--tag-output={host}| ", "t.py"}, Machine(0), env).workers()->tag_format ==
        std::optional<std::string>("{host}| "));
  CHECK_FALSE(MustDecide({"--nproc-per-node", "2", "--no-tag", "t.py"}, Machine(0), env).workers()->tag_format);
  CHECK(MustDecide({"--nproc-per-node", "2", "t.py"}, Machine(0), {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", ""}})
            .workers()
            ->tag_format == std::optional<std::string>("[{rank}]: "));
  // A bad template does not matter where a flag wins.
  const EnvMap bad_env = {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${node}] "}};
  CHECK_FALSE(MustDecide({"--nproc-per-node", "2", "--no-tag", "t.py"}, Machine(0), bad_env).workers()->tag_format);
  Result<Plan> bad = DecideFor({"--nproc-per-node", "2", "t.py"}, Machine(0),
                               {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${node}] "}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE: unknown field '${node}' in '[${node}] ' (torch fills ${role_name}, "
        "${rank} and ${local_rank})");
  // A head launch passes it to its agents as the tag.
  Plan head = MustDecide({"-H", "a,b", "t.py"}, Machine(0), env);
  const auto& flags = std::get<HeadPlan>(head.run).agent_flags;
  CHECK(std::find(flags.begin(), flags.end(), "--tag-output=[{role}:{rank}/{local_rank}] ") != flags.end());
}

}  // namespace dlaunch::launcher::torchrun_compat_test
