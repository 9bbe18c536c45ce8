// DecideJob: a job spec on disk, with --set edits and dlaunch flags, becomes the
// flags a user would type and the plan they decide; each way a job runs (one
// agent per instance here or on listed nodes, an mpirun command here or on node
// 0) and each refusal, naming what was wrong.
#include "launcher/config/job_plan.hpp"

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/config/programs_codec.hpp"
#include "tests/temp_dir.hpp"

namespace dlaunch::launcher {
namespace {

using dlaunch::testing::TempDir;

const MachineFacts kFacts{"here", 4, {}, "fresh"};

// Writes `yaml` as a spec file in `dir` and decides `dlaunch job FILE args...`.
Result<JobPlan> DecideSpec(const TempDir& dir, const std::string& yaml, std::vector<std::string> args = {},
                           envmap::EnvMap env = {}) {
  std::string file = dir / "job.yml";
  std::ofstream(file) << yaml;
  args.insert(args.begin(), file);
  return DecideJob(args, std::move(env), kFacts);
}

JobPlan MustDecideSpec(const TempDir& dir, const std::string& yaml, std::vector<std::string> args = {},
                       envmap::EnvMap env = {}) {
  Result<JobPlan> job = DecideSpec(dir, yaml, std::move(args), std::move(env));
  INFO(job.status().message());
  REQUIRE(job.ok());
  return *job;
}

bool Has(const std::vector<std::string>& flags, const std::string& flag) {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

// The value after `flag` in `flags`, or "" when it is not there.
std::string After(const std::vector<std::string>& flags, const std::string& flag) {
  auto it = std::find(flags.begin(), flags.end(), flag);
  return it == flags.end() || it + 1 == flags.end() ? "" : *(it + 1);
}

constexpr const char* kTorch =
    "command: python train.py\ndistribution:\n  type: pytorch\n  process_count_per_instance: 2\n"
    "resources:\n  instance_count: 2\n";
constexpr const char* kMpirun =
    "command: mpirun -np 4 python train.py\ndistribution:\n  type: mpi\n  process_count_per_instance: 2\n"
    "resources:\n  instance_count: 2\n";

TEST_CASE("DecideJob: each instance a node of this machine, on a loopback address of its own", "[job_plan]") {
  TempDir dir("job-plan");
  JobPlan job = MustDecideSpec(dir, kTorch, {"--set", "environment_variables.LR=0.1"});
  CHECK(After(job.flags, "-H") == "127.0.0.1:2,127.0.0.2:2");
  CHECK(After(job.flags, "--nproc-per-node") == "2");
  CHECK(After(job.flags, "-x") == "LR=0.1");
  // The spec's command runs through a shell, as the platform runs it.
  std::vector<std::string> tail(job.flags.end() - 4, job.flags.end());
  CHECK(tail == std::vector<std::string>{"--", "/bin/sh", "-c", "python train.py"});
  REQUIRE(job.plan.mode() == Mode::kHead);
  const HeadPlan& head = std::get<HeadPlan>(job.plan.run);
  REQUIRE(head.hosts.size() == 2);
  CHECK(head.hosts[1].host == "127.0.0.2");
  CHECK(head.workers == std::vector<std::string>{"2", "2"});
  CHECK(job.hostfile.empty());
}

TEST_CASE("DecideJob: with a node list, the instances are its nodes in order", "[job_plan]") {
  TempDir dir("job-plan");
  JobPlan job = MustDecideSpec(dir, kTorch, {"-H", "n1,n2", "--events", "e.jsonl"});
  const HeadPlan& head = std::get<HeadPlan>(job.plan.run);
  REQUIRE(head.hosts.size() == 2);
  CHECK(head.hosts[0].host == "n1");
  CHECK(head.events == "e.jsonl");  // the user's flags go after the spec's
  Result<JobPlan> short_list = DecideSpec(dir, kTorch, {"-H", "n1,n2,n3"});
  REQUIRE_FALSE(short_list.ok());
  CHECK(short_list.status().message().find("the spec has 2 instance(s) but the node list has 3 node(s)") !=
        std::string::npos);
}

TEST_CASE("DecideJob: TensorFlow's tasks are groups, each type on instances of its own", "[job_plan]") {
  TempDir dir("job-plan");
  constexpr const char* kTf =
      "command: python tf.py\nenvironment_variables:\n  MAGIC: job\ndistributed:\n  tensorflow:\n"
      "    worker:\n      count: 2\n    parameter_server:\n      count: 1\n      environment_variables:\n"
      "        MAGIC: newnumber\n";
  JobPlan job = MustDecideSpec(dir, kTf, {"-H", "n1,n2,n3", "--events", "e.jsonl"});
  // What a user would type for the same job: one group a task type, --env tf.
  CHECK(
      fmt::format("{}", fmt::join(job.flags, " ")) ==
      "-H n1:1,n2:1 --nproc-per-node 1 --role worker --env tf --events e.jsonl -x MAGIC=job -- /bin/sh -c python tf.py"
      " : -H n3:1 --nproc-per-node 1 --role ps -x MAGIC=job -x MAGIC=newnumber -- /bin/sh -c python tf.py");
  REQUIRE(job.plan.mode() == Mode::kHead);
  const HeadPlan& head = std::get<HeadPlan>(job.plan.run);
  REQUIRE(head.hosts.size() == 3);
  CHECK(head.hosts[2].host == "n3");
  CHECK(head.events == "e.jsonl");
  // The agents get the groups: workers on n1 and n2, the ps on n3, TF_CONFIG on.
  Result<envmap::ProgramPlan> sent = DecodePrograms(head.programs);
  REQUIRE(sent.ok());
  CHECK(sent->tf);
  CHECK(sent->node_counts == std::vector<std::vector<int>>{{1, 0}, {1, 0}, {0, 1}});
  REQUIRE(sent->groups.size() == 2);
  CHECK(sent->groups[1].role == "ps");
  CHECK(sent->groups[1].env == envmap::EnvVars{{"MAGIC", "job"}, {"MAGIC", "newnumber"}});
  Result<JobPlan> short_list = DecideSpec(dir, kTf, {"-H", "n1,n2"});
  REQUIRE_FALSE(short_list.ok());
  CHECK(short_list.status().message().find("the spec has 3 instance(s) but the node list has 2 node(s)") !=
        std::string::npos);
}

TEST_CASE("DecideJob: an mpirun command runs once, here with a hostfile of this machine's slots", "[job_plan]") {
  TempDir dir("job-plan");
  JobPlan job = MustDecideSpec(dir, kMpirun, {}, {{"TMPDIR", dir.path}, {"AZUREML_MPI_HOSTFILE", "/stale"}});
  CHECK(job.plan.mode() == Mode::kSingleNode);
  CHECK(job.plan.workers()->nproc == 1);
  CHECK(job.hostfile == "localhost slots=4\n");
  CHECK(job.hostfile_dir == dir.path);
  // A stale hostfile of the surroundings is not the one the command reads.
  CHECK_FALSE(job.plan.workers()->inherited.contains("AZUREML_MPI_HOSTFILE"));
}

TEST_CASE("DecideJob: an mpirun command across listed nodes runs once, on node 0, told every node's slots",
          "[job_plan]") {
  TempDir dir("job-plan");
  JobPlan job = MustDecideSpec(dir, kMpirun, {"-H", "n1,n2"});
  const HeadPlan& head = std::get<HeadPlan>(job.plan.run);
  REQUIRE(head.hosts.size() == 1);
  CHECK(head.hosts[0].host == "n1");
  CHECK(Has(job.flags, "DLAUNCH_JOB_HOSTS=n1 slots=2,n2 slots=2"));
  // The wrapper runs the spec's command as its $0, after `sh -c WRAPPER`.
  CHECK(job.flags.back() == "mpirun -np 4 python train.py");
  CHECK(job.hostfile.empty());
}

TEST_CASE("DecideJob: a horovodrun command gives way to dlaunch, which runs its workers and serves the store",
          "[job_plan][horovod]") {
  TempDir dir("job-plan");
  auto spec = [](const std::string& command) {
    return "command: " + command +
           "\ndistribution:\n  type: mpi\n  process_count_per_instance: 2\nresources:\n  instance_count: 2\n";
  };
  JobPlan job =
      MustDecideSpec(dir, spec("horovodrun -np 4 --hostfile $AZUREML_MPI_HOSTFILE --gloo python train.py --lr 'a b'"));
  CHECK(After(job.flags, "-H") == "127.0.0.1:2,127.0.0.2:2");
  CHECK(After(job.flags, "--env") == "horovod");
  std::vector<std::string> tail(job.flags.end() - 4, job.flags.end());
  CHECK(tail == std::vector<std::string>{"--", "/bin/sh", "-c", "python train.py --lr 'a b'"});
  CHECK(std::get<HeadPlan>(job.plan.run).hosts.size() == 2);
  // Spelled otherwise: the path, --num-proc=N, -H, no -np at all.
  for (const char* command : {"/usr/bin/horovodrun --num-proc=4 -H h1:2,h2:2 python x.py", "horovodrun python x.py"}) {
    JobPlan other = MustDecideSpec(dir, spec(command));
    CHECK(other.flags.back() == "python x.py");
    CHECK(After(other.flags, "--env") == "horovod");
  }
  auto error = [&](const std::string& command) {
    Result<JobPlan> bad = DecideSpec(dir, spec(command), {});
    REQUIRE_FALSE(bad.ok());
    return bad.status().message();
  };
  CHECK_THAT(error("horovodrun -np 8 python x.py"),
             Catch::EndsWith("command: horovodrun -np 8, but the spec runs 4 processes (2 instances of 2)"));
  CHECK_THAT(error("horovodrun -np four python x.py"),
             Catch::EndsWith("command: horovodrun -np four: expected a positive number"));
  CHECK_THAT(error("horovodrun --mpi -np 4 python x.py"),
             Catch::Contains("horovodrun's --mpi is not one dlaunch reads"));
  CHECK_THAT(error("horovodrun -np 4"), Catch::EndsWith("command: horovodrun without a program to run"));
  CHECK_THAT(error("horovodrun -np"), Catch::EndsWith("command: horovodrun's -np expects a value"));
  CHECK_THAT(error("horovodrun -H 'a b' python x.py"), Catch::Contains("has a quote"));
  // mpirun keeps running once, as before.
  CHECK(After(MustDecideSpec(dir, kMpirun).flags, "--nproc-per-node") == "1");
}

TEST_CASE("DecideJob refuses, naming the input", "[job_plan]") {
  TempDir dir("job-plan");
  auto error = [&](std::vector<std::string> args) {
    Result<JobPlan> job = DecideSpec(dir, kTorch, std::move(args));
    REQUIRE_FALSE(job.ok());
    return job.status().message();
  };
  CHECK(error({"--nproc-per-node", "3"}) ==
        "--nproc-per-node: the job spec decides it (change the spec, or use --set KEY.PATH=VALUE)");
  CHECK(error({"--nproc_per_node=3"}) ==
        "--nproc_per_node: the job spec decides it (change the spec, or use --set KEY.PATH=VALUE)");
  CHECK(error({"--set"}) == "--set: expects KEY.PATH=VALUE");
  CHECK(error({"-H"}) == "-H: expects a value");
  CHECK(DecideJob({}, {}, kFacts).status().message().starts_with("job: no spec file given"));
  Result<JobPlan> missing = DecideJob({dir / "none.yml"}, {}, kFacts);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find(dir / "none.yml") != std::string::npos);
}

}  // namespace
}  // namespace dlaunch::launcher
