#include "launcher/process/slurm_signals.hpp"

#include <csignal>
#include <fstream>

#include <catch2/catch.hpp>

#include "tests/temp_dir.hpp"

namespace dlaunch::launcher {
namespace {

TEST_CASE("SlurmScopeOf: a job step's task under any proctrack but pgid", "[slurm_signals]") {
  envmap::EnvMap step = {{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", "0"}};
  CHECK(SlurmScopeOf(step, "proctrack/cgroup").step_wide);
  CHECK(SlurmScopeOf(step, "proctrack/linuxproc").step_wide);
  CHECK(SlurmScopeOf(step, "").step_wide);  // Slurm's default: cgroup
  // pgid signals the task's process group; each worker has its own.
  CHECK_FALSE(SlurmScopeOf(step, "proctrack/pgid").step_wide);
  // The batch step (no SLURM_STEP_ID): slurmstepd's signal is B:'s, to the shell only.
  CHECK_FALSE(SlurmScopeOf({{"SLURM_JOB_ID", "7"}}, "proctrack/cgroup").step_wide);
  CHECK_FALSE(SlurmScopeOf({{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", "batch"}}, "").step_wide);
  CHECK_FALSE(SlurmScopeOf({{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", "4294967294"}}, "").step_wide);
  CHECK_FALSE(SlurmScopeOf({}, "").step_wide);
}

TEST_CASE("PassOnToWorkers: all but slurmstepd's step-wide signals", "[slurm_signals]") {
  SlurmSignalScope wide{true};
  CHECK_FALSE(PassOnToWorkers(wide, "slurmstepd"));
  CHECK(PassOnToWorkers(wide, "bash"));
  CHECK(PassOnToWorkers(wide, "dlaunch"));  // a head or a parent dlaunch passing it on
  CHECK(PassOnToWorkers(wide, ""));         // unknown: the kernel, another PID namespace
  CHECK(PassOnToWorkers(SlurmSignalScope{false}, "slurmstepd"));
}

TEST_CASE("ReadProctrackType: slurm.conf's value, from $SLURM_CONF", "[slurm_signals]") {
  testing::TempDir dir("slurmconf");
  std::string conf = dir.path + "/slurm.conf";
  std::ofstream(conf) << "# ProctrackType=proctrack/cgroup\nClusterName=x\n  proctracktype = proctrack/pgid # old\n";
  CHECK(ReadProctrackType({{"SLURM_JOB_ID", "1"}, {"SLURM_CONF", conf}}) == "proctrack/pgid");
  CHECK(ReadProctrackType({{"SLURM_CONF", conf}}).empty());  // not in a job: not read
  CHECK(ReadProctrackType({{"SLURM_JOB_ID", "1"}, {"SLURM_CONF", dir.path + "/none"}}).empty());
}

TEST_CASE("a head passes SIGUSR1/2 on as the query 'signal SIGUSR1'; nothing else reads as one", "[slurm_signals]") {
  CHECK(PassOnQuery(SIGUSR1) == "signal SIGUSR1");
  CHECK(PassedOnSignal(PassOnQuery(SIGUSR1)) == SIGUSR1);
  CHECK(PassedOnSignal(PassOnQuery(SIGUSR2)) == SIGUSR2);
  // A stop signal goes by Abort, never as a pass-on.
  CHECK_FALSE(PassedOnSignal("signal SIGTERM").has_value());
  CHECK_FALSE(PassedOnSignal("signal SIGKILL").has_value());
  CHECK_FALSE(PassedOnSignal("status").has_value());
  CHECK_FALSE(PassedOnSignal("signal").has_value());
  CHECK_FALSE(PassedOnSignal("signal nonsense").has_value());
}

}  // namespace
}  // namespace dlaunch::launcher
