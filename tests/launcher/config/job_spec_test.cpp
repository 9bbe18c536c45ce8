// The seeds' job specs (../shared/seeds/000: MPI, PyTorch, TensorFlow in the
// distributed: form; 001/004: the distribution: form), each read whole.
#include "launcher/config/job_spec.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dlaunch::launcher {
namespace {

JobSpec Must(const std::string& yaml, std::vector<std::string> sets = {}) {
  Result<JobSpec> s = ParseJobSpec(yaml, "/jobs/job.yml", sets);
  INFO(s.status().message());
  REQUIRE(s.ok());
  return *s;
}

std::string SpecError(const std::string& yaml, std::vector<std::string> sets = {}) {
  Result<JobSpec> s = ParseJobSpec(yaml, "/jobs/job.yml", sets);
  REQUIRE_FALSE(s.ok());
  return s.status().message();
}

std::string Roles(const JobSpec& s) {
  std::vector<std::string> out;
  for (const envmap::RoleSpec& r : s.roles) {
    std::vector<std::string> env;
    for (const auto& [k, v] : r.env) env.push_back(k + "=" + v);
    out.push_back(fmt::format("{}:{}[{}]", r.name, r.count, fmt::join(env, " ")));
  }
  return fmt::format("{}", fmt::join(out, ","));
}

constexpr const char* kMpiHorovod = R"(command: >-
  horovodrun -np 16 --hostfile $AZUREML_MPI_HOSTFILE python train.py
code:
  path: ./src
environment:
  docker:
    image: docker.io/pytorch
distributed:
  mpi:
    worker:
      count: 4
      slots_per: 4
compute:
  infrastructure: managed
  instance_type: Standard_NC24
)";

constexpr const char* kTfPs = R"(command: python train.py --magic $MAGIC
code:
  path:
    ./src
environment:
  docker:
    image: docker.io/tensorflow
environment_variables:
  MAGIC: number

distributed:
  tensorflow:
    worker:
      count: 2
      resource_limits:
        cpu: 4
    parameter_server:
      count: 4
      environment:
        docker:
          image: docker.io/python
      resource_limits:
        gpu: 4
        memory: 2Gi
      environment_variables:
        MAGIC: newnumber
compute:
  infrastructure: managed
  target: gpu-cluster
)";

}  // namespace

TEST_CASE("job spec, distributed: mpi with horovodrun: 4 instances of 4, the command launches MPI itself", "[job]") {
  JobSpec s = Must(kMpiHorovod);
  CHECK(s.kind == JobKind::kMpi);
  CHECK(s.instances == 4);
  CHECK(s.processes == std::optional<int>(4));
  CHECK(s.WorldSize() == 16);
  CHECK(s.CommandLaunchesMpi());
  CHECK(s.code_dir == "/jobs/src");
  CHECK(s.not_applied == std::vector<std::string>{"environment (line 5)", "compute.infrastructure (line 14)",
                                                  "compute.instance_type (line 15)"});
}

TEST_CASE("job spec, distributed: tensorflow with parameter servers and per-role variables", "[job]") {
  JobSpec s = Must(kTfPs);
  CHECK(s.kind == JobKind::kTensorFlow);
  CHECK(s.instances == 6);
  CHECK(s.WorldSize() == 6);
  CHECK(Roles(s) == "worker:2[],ps:4[MAGIC=newnumber]");
  CHECK(s.env == envmap::EnvVars{{"MAGIC", "number"}});
  CHECK(s.command == "python train.py --magic $MAGIC");
  CHECK_FALSE(s.CommandLaunchesMpi());
  CHECK(s.not_applied.size() == 6);
}

TEST_CASE("job spec, distributed: pytorch per node (torch.distributed.launch in the command)", "[job]") {
  JobSpec s = Must(R"(command: >-
  python -m torch.distributed.launch --nproc_per_node 4 --nnodes 4
  --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port $MASTER_PORT --use_env
  python train.py
distributed:
  pytorch:
    worker:
      count: 4
)");
  CHECK(s.kind == JobKind::kPyTorch);
  CHECK(s.instances == 4);
  CHECK_FALSE(s.processes.has_value());
  CHECK(s.WorldSize() == 4);
  CHECK(s.code_dir.empty());
}

TEST_CASE("job spec, distribution: form with the instance count from compute or resources", "[job]") {
  JobSpec mpi = Must(
      "command: python train.py\ndistribution:\n  type: mpi\n  process_count_per_instance: 2\n"
      "compute:\n  node_count: 3\n");
  CHECK(mpi.kind == JobKind::kMpi);
  CHECK(mpi.instances == 3);
  CHECK(mpi.WorldSize() == 6);
  CHECK_FALSE(mpi.CommandLaunchesMpi());
  JobSpec torch = Must(
      "command: python train.py\ndistribution:\n  type: PyTorch\n  process_count_per_instance: 2\n"
      "resources:\n  instance_count: 2\n");
  CHECK(torch.kind == JobKind::kPyTorch);
  CHECK(torch.processes == std::optional<int>(2));
  JobSpec tf = Must(
      "command: python t.py\ndistribution:\n  type: tensorflow\n  worker_count: 2\n"
      "  parameter_server_count: 1\ncompute:\n  instance_count: 3\n");
  CHECK(Roles(tf) == "worker:2[],ps:1[]");
  CHECK(tf.instances == 3);
}

TEST_CASE("job spec --set overrides before the checks", "[job]") {
  JobSpec s =
      Must("command: python train.py\ndistribution:\n  type: pytorch\n",
           {"distribution.process_count_per_instance=2", "resources.instance_count=2", "environment_variables.LR=0.1"});
  CHECK(s.instances == 2);
  CHECK(s.processes == std::optional<int>(2));
  CHECK(s.env == envmap::EnvVars{{"LR", "0.1"}});
  CHECK(SpecError("command: x\ndistribution: {type: mpi}\n", {"nokey"}) ==
        "--set: expected KEY.PATH=VALUE, got 'nokey'");
  CHECK(SpecError("command: x\ndistribution: {type: mpi}\n", {"command.x=1"}) ==
        "--set command.x=1: 'command' is not a mapping");
}

TEST_CASE("job spec errors about what a --set put there name the --set, not a line", "[job]") {
  constexpr const char* kSpec = "command: x\ndistributed:\n  mpi:\n    worker:\n      count: 2\n";
  CHECK(
      SpecError(kSpec, {"distributed.mpi.worker.count=x"}) ==
      "--set distributed.mpi.worker.count=x: distributed.mpi.worker.count: expected a number from 1 to 65536, got 'x'");
  CHECK(SpecError(kSpec, {"distributed.mpi.workr.count=3"}) ==
        "--set distributed.mpi.workr.count=3: unknown key 'distributed.mpi.workr' (did you mean "
        "'distributed.mpi.worker'?)");
  CHECK(SpecError(kSpec, {"distributed.mpi.worker={count: 2, slots_pr: 2}"}) ==
        "--set distributed.mpi.worker={count: 2, slots_pr: 2}: unknown key 'distributed.mpi.worker.slots_pr' (did you "
        "mean 'distributed.mpi.worker.slots_per'?)");
  // The file's own lines are still named when the --set is not at fault.
  CHECK(SpecError("command: x\ndistributed:\n  mpi:\n    worker:\n      count: 2\n      slot_per: 1\n",
                  {"distributed.mpi.worker.count=3"}) ==
        "/jobs/job.yml:6: unknown key 'distributed.mpi.worker.slot_per' (did you mean "
        "'distributed.mpi.worker.slots_per'?)");
}

TEST_CASE("job spec: where the instance count came from, for a node list that does not match", "[job]") {
  CHECK(Must("command: x\ndistributed:\n  mpi:\n    worker:\n      count: 2\n").instances_at == "/jobs/job.yml:5");
  CHECK(Must("command: x\ndistributed:\n  tensorflow:\n    worker: {count: 2}\n").instances_at == "/jobs/job.yml:3");
  CHECK(Must("command: x\ndistribution:\n  type: pytorch\nresources:\n  instance_count: 2\n").instances_at ==
        "/jobs/job.yml:5");
  CHECK(Must("command: x\ndistribution:\n  type: tensorflow\n  worker_count: 3\n").instances_at == "/jobs/job.yml:4");
  CHECK(Must("command: x\ndistribution:\n  type: mpi\n").instances_at == "/jobs/job.yml:3");
  CHECK(Must("command: x\ndistribution:\n  type: mpi\n", {"compute.instance_count=4"}).instances_at ==
        "--set compute.instance_count=4");
}

TEST_CASE("job spec errors name the file and the line", "[job]") {
  CHECK(SpecError("command: x\ndistributed:\n  pytorch:\n    workr:\n      count: 2\n") ==
        "/jobs/job.yml:4: unknown key 'distributed.pytorch.workr' (did you mean 'distributed.pytorch.worker'?)");
  CHECK(SpecError("comand: x\n") == "/jobs/job.yml:1: unknown key 'comand' (did you mean 'command'?)");
  CHECK(SpecError("command: x\ndistributed:\n  mpi:\n    worker:\n      count: 0\n") ==
        "/jobs/job.yml:5: distributed.mpi.worker.count: expected a number from 1 to 65536, got '0'");
  CHECK(SpecError("command: x\ndistributed:\n  mpi:\n    worker:\n      count: [1]\n") ==
        "/jobs/job.yml:5: distributed.mpi.worker.count: expected a number");
  CHECK(SpecError("command: x\ndistribution:\n  type: mxnet\n") ==
        "/jobs/job.yml:3: distribution.type: expected mpi, pytorch or tensorflow, got 'mxnet'");
  CHECK(
      SpecError("command: x\ndistribution:\n  type: tensorflow\n  worker_count: 2\ncompute:\n  instance_count: 3\n") ==
      "/jobs/job.yml:3: distribution: 2 worker(s) and 0 parameter server(s) make 2 tasks, one per instance, but the "
      "instance count is 3");
  CHECK(SpecError("distribution:\n  type: mpi\n") == "/jobs/job.yml: command: missing");
  CHECK(SpecError("command: x\n") ==
        "/jobs/job.yml: needs distributed: (mpi, pytorch or tensorflow) or distribution: (type: ...)");
  CHECK(SpecError("command: [x\n").starts_with("/jobs/job.yml:"));
  CHECK(SpecError("- a\n- b\n") == "/jobs/job.yml: expected a job spec (a YAML mapping)");
  CHECK(SpecError("command: x\ndistributed:\n  mpi:\n    worker:\n      count: 99999999999999999999\n") ==
        "/jobs/job.yml:5: distributed.mpi.worker.count: expected a number from 1 to 65536, got '99999999999999999999'");
}

TEST_CASE("job spec: an alias bomb in the file or in a --set is refused in one line", "[job][bounds]") {
  // 9 levels of 9 aliases each: 9^9 nodes in under 500 bytes.
  std::string bomb = "{a: &a [x, x, x, x, x, x, x, x, x]";
  for (char c = 'b'; c <= 'i'; ++c) {
    bomb += fmt::format(", {}: &{} [", c, c);
    for (int j = 0; j < 9; ++j) bomb += fmt::format("{}*{}", j ? ", " : "", static_cast<char>(c - 1));
    bomb += "]";
  }
  bomb += "}";
  REQUIRE(bomb.size() < 500);
  constexpr const char* kSpec = "command: x\ndistribution: {type: mpi}\n";
  // The --set text is quoted only in part: 64 bytes, then its size.
  std::string set = "tags=" + bomb;
  CHECK(SpecError(kSpec, {set}) ==
        fmt::format("--set {}... ({} bytes): expands to more than 100000 YAML nodes (aliases count each time they are "
                    "used)",
                    set.substr(0, 64), set.size()));
  CHECK(SpecError(std::string(kSpec) + "tags: " + bomb + "\n") ==
        "/jobs/job.yml: expands to more than 100000 YAML nodes (aliases count each time they are used)");
  // Each --set is small, together they are not.
  std::vector<std::string> sets;
  std::string half = "[&a [x, x, x, x, x, x, x, x, x]";
  for (int j = 0; j < 6000; ++j) half += ", *a";
  half += "]";
  for (int i = 0; i < 2; ++i) sets.push_back(fmt::format("tags.t{}={}", i, half));
  CHECK(SpecError(kSpec, sets) ==
        "/jobs/job.yml with its --set values: expands to more than 100000 YAML nodes (aliases count each time they "
        "are used)");
  CHECK(SpecError(kSpec, std::vector<std::string>(1001, "tags.a=1")) == "--set: 1001 given, over the limit of 1000");
}

TEST_CASE("job spec: a 20,000-deep --set is refused quoting a short prefix", "[job][bounds]") {
  constexpr const char* kSpec = "command: x\ndistribution: {type: mpi}\n";
  std::string deep_value = "tags=" + std::string(20000, '[') + std::string(20000, ']');
  CHECK(SpecError(kSpec, {deep_value}) ==
        fmt::format("--set {}... (40005 bytes): nested deeper than 64 levels", deep_value.substr(0, 64)));
  std::string deep_path;
  for (int i = 0; i < 20000; ++i) deep_path += "a.";
  deep_path += "b=1";
  CHECK(SpecError(kSpec, {deep_path}) ==
        fmt::format("--set {}... (40003 bytes): a key path of 20001 levels, over the limit of 64",
                    deep_path.substr(0, 64)));
  // A long key from the file is cut too (an explicit key: YAML allows no plain one this long).
  std::string key(5000, 'k');
  CHECK(SpecError(std::string(kSpec) + "? " + key + "\n: 1\n") ==
        fmt::format("/jobs/job.yml:3: unknown key '{}... (5000 bytes)'", key.substr(0, 64)));
}

TEST_CASE("job spec: a NUL in the command or a variable is refused naming the field", "[job][bounds]") {
  CHECK(SpecError("command: \"echo 'a\\0b'\"\ndistribution: {type: mpi}\n") ==
        "/jobs/job.yml:1: command: contains a NUL byte, which no command or path can hold");
  CHECK(SpecError("command: x\ndistribution: {type: mpi}\nenvironment_variables:\n  A: \"x\\0y\"\n") ==
        "/jobs/job.yml:4: environment_variables.A: contains a NUL byte, which no environment variable can hold");
  CHECK(SpecError("command: x\ndistribution: {type: mpi}\ncode: \"a\\0b\"\n") ==
        "/jobs/job.yml:3: code: contains a NUL byte, which no command or path can hold");
  CHECK(SpecError("command: x\ndistribution: {type: mpi}\n", {"command=\"a\\0b\""}) ==
        "--set command=\"a\\0b\": command: contains a NUL byte, which no command or path can hold");
}

}  // namespace dlaunch::launcher
