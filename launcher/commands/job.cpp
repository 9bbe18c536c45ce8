#include "launcher/commands/job.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/core/exit.hpp"
#include "launcher/core/output.hpp"
#include "launcher/core/private_dir.hpp"
#include "launcher/modes/dispatch.hpp"
#include "launcher/modes/local.hpp"
#include "launcher/modes/remote.hpp"

namespace dlaunch::launcher {

int RunJob(const JobPlan& job, const envmap::EnvMap& env) {
  const JobSpec& spec = job.spec;
  if (!spec.not_applied.empty())
    WriteAll(STDERR_FILENO, fmt::format("dlaunch: {}: not applied here (the platform's): {}\n", job.file,
                                        fmt::join(spec.not_applied, ", ")));
  if (job.plan.explain) {
    std::vector<std::string> shown;
    for (const std::string& f : job.flags) shown.push_back(ShellQuote(f));
    std::printf("job: %s: %d instance(s), %d process(es) in all, as: dlaunch %s\n", job.file.c_str(), spec.instances,
                spec.WorldSize(), fmt::format("{}", fmt::join(shown, " ")).c_str());
    std::fflush(stdout);
  }
  if (!spec.code_dir.empty() && chdir(spec.code_dir.c_str()) != 0)
    return Fail(kExitUsage,
                fmt::format("{}: code.path {}: cannot enter ({})", job.file, spec.code_dir, std::strerror(errno)));
  std::string hostfile;
  if (!job.hostfile.empty() && !job.plan.explain) {
    // mpirun reads it by name: in a directory where no other user can swap it.
    Result<PrivateDir> dir = TrustedTempDir(job.hostfile_dir);
    if (!dir.ok()) return Fail(1, dir.status().message());
    SayTmpdirNote(dir->note);
    Result<std::string> path = WriteTempFile(dir->path, "dlaunch-hosts-", "", job.hostfile);
    if (!path.ok()) return Fail(1, path.status().message());
    hostfile = *path;
  }
  int code = RunInMode(hostfile.empty() ? job.plan : WithInherited(job.plan, "AZUREML_MPI_HOSTFILE", hostfile), env);
  if (!hostfile.empty()) unlink(hostfile.c_str());
  return code;
}

}  // namespace dlaunch::launcher
