#include "launcher/config/coordinator_options.hpp"

#include <fmt/format.h>

#include "base/defaults.hpp"
#include "launcher/config/cli.hpp"
#include "launcher/config/metrics_addr.hpp"
#include "launcher/config/subcommands.hpp"
#include "launcher/config/recovery_flags.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/coordinator.hpp"

namespace dlaunch::launcher {

rendezvous::CoordinatorOptions CoordinatorOptionsFor(const Options& o, std::optional<int> master_port,
                                                     const std::string& run_id, int min_nodes, int max_nodes,
                                                     int max_restarts, const std::string& token) {
  rendezvous::CoordinatorOptions c;
  c.run_id = run_id;
  c.min_nodes = min_nodes;
  c.max_nodes = max_nodes;
  c.max_restarts = max_restarts;
  c.join_timeout = o.join_timeout;
  c.last_call_timeout = o.last_call_timeout;
  c.heartbeat_timeout = o.heartbeat_timeout;
  c.token = token;
  c.master_port = master_port.value_or(0);
  c.hang_timeout = o.hang_timeout;
  c.hang_stop = o.hang_stop;
  // The flag table checked every value: reading them again cannot fail.
  Result<RecoveryFlags> read = ReadRecoveryFlags(o);
  RecoveryFlags recovery = read.ok() ? *read : RecoveryFlags{};
  c.spares = recovery.spares;
  c.max_no_progress_restarts = recovery.max_no_progress_restarts;
  c.backoff_min = recovery.backoff_min;
  c.backoff_max = recovery.backoff_max;
  return c;
}

Result<std::string> ResolveToken(const Options& o, const envmap::EnvMap& env) {
  rendezvous::TokenSources sources;
  if (!o.rdzv_token.empty()) sources.flag = o.rdzv_token;
  if (auto it = env.find(rendezvous::kTokenEnvVar); it != env.end()) sources.env = it->second;
  if (!o.rdzv_token_file.empty()) {
    Result<rendezvous::TokenFile> file = rendezvous::ReadTokenFile(o.rdzv_token_file);
    if (!file.ok()) return file.status();
    sources.file = *file;
  }
  return rendezvous::ChooseToken(sources);
}

std::string DaemonUsage() {
  return "usage: dlaunch coordinator --listen ADDR:PORT [--rdzv-token T | --rdzv-token-file F] "
         "[--rdzv-conf join_timeout=S,last_call_timeout=S,heartbeat_timeout=S] [--metrics-addr HOST:PORT]\n"
         "\n"
         "Serves many jobs, keyed by --rdzv-id. A job is created by the first authenticated\n"
         "join of its run id, sized by that agent's --nnodes and --max-restarts (and its\n"
         "--hang-timeout and --hang-action: a job-wide hang is logged here). A job with\n"
         "no agent connected for join_timeout (default 600s) is forgotten. --metrics-addr (or\n"
         "DLAUNCH_METRICS_ADDR) serves /metrics, /healthz and /readyz (PORT alone: loopback).\n\n" +
         ExampleLine("coordinator");
}

Result<DaemonPlan> DecideDaemon(const std::vector<std::string>& args, const envmap::EnvMap& env) {
  DaemonPlan plan;
  std::vector<std::string> rest;
  std::string listen;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    std::string name = arg.substr(0, arg.find('='));
    if (name == "--listen") {
      if (arg.size() > name.size())
        listen = arg.substr(name.size() + 1);
      else if (i + 1 < args.size())
        listen = args[++i];
      else
        return Status::InvalidArgument("--listen: expects a value");
      continue;
    }
    if (name == "-h" || name == "--help") {
      plan.help = true;
      return plan;
    }
    std::string dashed = name;
    for (char& c : dashed)
      if (c == '_') c = '-';
    if (dashed != "--rdzv-token" && dashed != "--rdzv-token-file" && dashed != "--rdzv-conf" &&
        dashed != "--metrics-addr")
      return Status::InvalidArgument(fmt::format(
          "'{}' is not a coordinator flag (--listen, --rdzv-token, --rdzv-token-file, --rdzv-conf, --metrics-addr)",
          name));
    rest.push_back(arg);
    if (arg.find('=') == std::string::npos && i + 1 < args.size()) rest.push_back(args[++i]);
  }
  if (listen.empty()) return Status::InvalidArgument("--listen: required (ADDR:PORT)");
  rest.push_back("--");
  rest.push_back("coordinator");  // the launcher's parser wants a command
  Result<Options> o = ParseCommandLine(rest, env);
  if (!o.ok()) return o.status();
  Result<rendezvous::HostPort> at = rendezvous::ParseHostPort(listen, base::kDefaultRdzvPort, "--listen");
  if (!at.ok()) return at.status();
  plan.listen = *at;
  Result<std::string> token = ResolveToken(*o, env);
  if (!token.ok()) return token.status();
  plan.jobs = CoordinatorOptionsFor(*o, o->master_port, "", 1, 1, 0, *token);
  plan.jobs.endpoint = at->ToString();
  Result<std::optional<rendezvous::HostPort>> metrics = MetricsAddrFor(o->metrics_addr, env);
  if (!metrics.ok()) return metrics.status();
  plan.metrics = *metrics;
  return plan;
}

rendezvous::CoordinatorOptions JobFor(const DaemonPlan& plan, const rendezvous::Hello& hello) {
  rendezvous::CoordinatorOptions c = plan.jobs;
  c.run_id = hello.run_id;
  c.min_nodes = hello.min_nodes;
  c.max_nodes = hello.max_nodes;
  c.max_restarts = hello.max_restarts;
  c.hang_timeout = std::chrono::milliseconds(hello.hang_timeout_ms);
  c.hang_stop = hello.hang_stop != 0;
  c.spares = hello.spares;
  c.max_no_progress_restarts = hello.max_no_progress_restarts;
  c.backoff_min = std::chrono::milliseconds(hello.backoff_min_ms);
  c.backoff_max = std::chrono::milliseconds(hello.backoff_max_ms);
  return c;
}

}  // namespace dlaunch::launcher
