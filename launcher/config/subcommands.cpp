#include "launcher/config/subcommands.hpp"

namespace dlaunch::launcher {

const std::vector<Subcommand>& Subcommands() {
  static const std::vector<Subcommand> all = {
      {"job", "SPEC.yml [--set KEY.PATH=VALUE]... [-H HOSTS | --hostfile F] [--explain] [FLAGS]",
       "run a job spec (distributed: mpi, pytorch, tensorflow) here or on a node list",
       "--set=KEY.PATH=VALUE -H=HOSTS --host=HOSTS --hostfile=FILE --nodes=HOSTS --explain --help",
       "dlaunch job pytorch.yml -H n1,n2 --explain"},
      {"status", "[RUN_ID] [--watch] [--dir DIR]",
       "this user's running jobs on this machine, or one job's ranks (state, CPU, memory, last line)",
       "--watch --dir=DIR --help", "dlaunch status job42 --watch"},
      {"stacks", "[RUN_ID] [--dir DIR]", "every rank's stack now, grouped as a hang report is; the job runs on",
       "--dir=DIR --help", "dlaunch stacks job42"},
      {"coordinator",
       "--listen ADDR:PORT [--rdzv-token T | --rdzv-token-file F] [--rdzv-conf KEY=VALUE,...] [--metrics-addr "
       "HOST:PORT]",
       "a stand-alone rendezvous coordinator that serves many jobs, keyed by --rdzv-id",
       "--listen=ADDR:PORT --rdzv-token=TOKEN --rdzv-token-file=FILE --rdzv-conf=KEY=VALUE,... "
       "--metrics-addr=HOST:PORT --help",
       "dlaunch coordinator --listen 10.0.0.1:29400 --rdzv-token-file /etc/dlaunch/token"},
  };
  return all;
}

const Subcommand* FindSubcommand(std::string_view name) {
  for (const Subcommand& s : Subcommands())
    if (name == s.name) return &s;
  return nullptr;
}

std::string ExampleLine(std::string_view name) {
  const Subcommand* s = FindSubcommand(name);
  return s == nullptr ? "" : std::string("example: ") + s->example + "\n";
}

}  // namespace dlaunch::launcher
