#include "launcher/commands/daemon.hpp"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <fmt/format.h>

#include "launcher/config/coordinator_options.hpp"
#include "launcher/core/console.hpp"
#include "launcher/core/event_loop.hpp"
#include "launcher/core/exit.hpp"
#include "launcher/core/text.hpp"
#include "launcher/jobwide/job_hang.hpp"
#include "launcher/metrics/metrics_service.hpp"
#include "launcher/modes/loopback_token.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/fd_limit.hpp"
#include "rendezvous/server.hpp"

namespace dlaunch::launcher {

namespace rdzv = dlaunch::rendezvous;

namespace {

// Each job's hangs are logged with its run id; their stacks go to one
// directory (KeptStacksDir). `say` must outlive `server`.
void LogHangs(rdzv::CoordinatorServer& server, const std::function<void(const std::string&)>& say) {
  auto dir = KeptStacksDir(say);
  auto job_say = [&say](const std::string& run_id) {
    return [&say, prefix = fmt::format("job {}: ", rdzv::QuoteId(run_id))](const std::string& line) {
      say(prefix + line);
    };
  };
  server.OnHang({[=](const std::string& run_id, const rdzv::HangSuspected& s) {
                   JobHangReporter(job_say(run_id), nullptr, dir).Suspected(s);
                 },
                 [=](const std::string& run_id, const rdzv::HangReport& r) {
                   JobHangReporter(job_say(run_id), nullptr, dir).Report(r);
                 }});
}

}  // namespace

int RunCoordinatorDaemon(const DaemonPlan& plan) {
  if (plan.help) {
    std::fputs(DaemonUsage().c_str(), stdout);
    return 0;
  }
  const rdzv::HostPort& at = plan.listen;
  // One descriptor an agent: take all the hard limit gives (this process runs no
  // workers to inherit it). A job that still does not fit is named once (server.hpp).
  rdzv::RaiseFdLimit();
  EventLoop loop;
  boost::asio::io_context& io = loop.io();
  DaemonPlan own = plan;
  if (own.jobs.token.empty() && IsLoopbackHost(io, at.host)) {
    // Every local user reaches loopback: this user's agents share its token (loopback_token.hpp).
    Result<std::string> token = OwnLoopbackToken(at.ToString());
    if (!token.ok()) return Fail(kExitUsage, token.status().message(), kDaemonName);
    own.jobs.token = *token;
  } else if (own.jobs.token.empty()) {
    std::fprintf(stderr, "dlaunch coordinator: %s: no token, so anyone who reaches it can join\n",
                 at.ToString().c_str());
  }

  // Each job is made from the first authenticated Join of its run id: its size and
  // restarts come from that agent's Hello (its own flags), the timeouts and token
  // from ours. The factory runs for every Hello, but the server creates a job only
  // once that agent has proven the token and joined (server.hpp).
  std::string endpoint = at.ToString();
  auto factory = [&own](const rdzv::Hello& hello) -> Result<rdzv::CoordinatorOptions> { return JobFor(own, hello); };
  // The log goes through the console: a stalled stderr must not stop the coordinator.
  Console console(io, STDOUT_FILENO, STDERR_FILENO);
  std::function<void(const std::string&)> say = [&console](const std::string& line) {
    // Lines quote what peers sent (host names, failure reasons): never raw to a terminal.
    console.Write(ConsoleStream::kErr, "dlaunch coordinator: " + SafeUtf8(line, false) + "\n");
  };
  auto server = rdzv::CoordinatorServer::Start(io, at, "--listen", factory, say);
  if (!server.ok()) return Fail(kExitUsage, server.status().message(), kDaemonName);
  LogHangs(**server, say);
  // A job whose agents all went away before it ran would otherwise stay for ever.
  (*server)->ExpireAbandonedJobs(plan.jobs.join_timeout);
  say(fmt::format("listening on {}", endpoint));
  // --metrics-addr: the server's counters; ready once it listens.
  rdzv::CoordinatorServer& coordinator = **server;
  MetricsPages pages{[&coordinator](Exposition& e) {
                       WriteServerCounters(coordinator.counters(), e);
                       e.Add("dlaunch_coordinator_jobs", static_cast<double>(coordinator.jobs()));
                     },
                     nullptr};
  auto metrics = StartMetricsService(io, plan.metrics, std::move(pages), say, nullptr);
  if (!metrics.ok()) return Fail(kExitUsage, metrics.status().message(), kDaemonName);

  boost::asio::signal_set stop(io, SIGINT, SIGTERM);
  stop.async_wait([&](boost::system::error_code ec, int sig) {
    if (ec) return;
    console.NoteStop();
    say(fmt::format("stopping on {} with {} job(s) open", SignalName(sig), (*server)->jobs()));
    loop.Exit(0);
  });
  int code = loop.Run();
  stop.cancel();
  console.Drain({SIGINT, SIGTERM});
  return code;
}

}  // namespace dlaunch::launcher
