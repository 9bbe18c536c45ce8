#include "launcher/modes/daemon.hpp"

#include <unistd.h>

#include <csignal>
#include <cstdio>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <fmt/format.h>

#include "launcher/config/cli.hpp"
#include "launcher/config/coordinator_options.hpp"
#include "launcher/core/console.hpp"
#include "launcher/core/event_loop.hpp"
#include "launcher/core/exit.hpp"
#include "launcher/core/text.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/server.hpp"

namespace dlaunch::launcher {

namespace rdzv = dlaunch::rendezvous;

namespace {

constexpr std::string_view kWho = "dlaunch coordinator";  // how its lines begin

}  // namespace

int RunCoordinatorDaemon(const std::vector<std::string>& args, const envmap::EnvMap& env) {
  // The daemon's flags are a few of the launcher's (--rdzv-token, --rdzv-token-file,
  // --rdzv-conf) plus --listen: parse those with the launcher's parser, so spelling,
  // PET_ defaults and messages are the same, and refuse the rest.
  std::vector<std::string> rest;
  std::string listen;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    std::string name = arg.substr(0, arg.find('='));
    if (name == "--listen") {
      if (arg.size() > name.size()) listen = arg.substr(name.size() + 1);
      else if (i + 1 < args.size()) listen = args[++i];
      else return Fail(kExitUsage, "--listen: expects a value", kWho);
      continue;
    }
    if (name == "-h" || name == "--help") {
      std::puts("usage: dlaunch coordinator --listen ADDR:PORT [--rdzv-token T | --rdzv-token-file F] "
                "[--rdzv-conf join_timeout=S,last_call_timeout=S,heartbeat_timeout=S]\n"
                "\n"
                "Serves many jobs, keyed by --rdzv-id. A job is created by the first authenticated\n"
                "join of its run id, sized by that agent's --nnodes and --max-restarts. A job with\n"
                "no agent connected for join_timeout (default 600s) is forgotten.");
      return 0;
    }
    std::string dashed = name;
    for (char& c : dashed) if (c == '_') c = '-';
    if (dashed != "--rdzv-token" && dashed != "--rdzv-token-file" && dashed != "--rdzv-conf")
      return Fail(kExitUsage,
                  fmt::format("'{}' is not a coordinator flag (--listen, --rdzv-token, --rdzv-token-file, --rdzv-conf)",
                              name),
                  kWho);
    rest.push_back(arg);
    if (arg.find('=') == std::string::npos && i + 1 < args.size()) rest.push_back(args[++i]);
  }
  if (listen.empty()) return Fail(kExitUsage, "--listen: required (ADDR:PORT)", kWho);
  rest.push_back("--");
  rest.push_back("coordinator");
  Result<Options> o = ParseCommandLine(rest, env);
  if (!o.ok()) return Fail(kExitUsage, o.status().message(), kWho);
  Result<rdzv::HostPort> at = rdzv::ParseHostPort(listen, 29400, "--listen");
  if (!at.ok()) return Fail(kExitUsage, at.status().message(), kWho);

  rdzv::TokenSources sources;
  if (!o->rdzv_token.empty()) sources.flag = o->rdzv_token;
  if (auto it = env.find(rdzv::kTokenEnvVar); it != env.end()) sources.env = it->second;
  if (!o->rdzv_token_file.empty()) {
    Result<rdzv::TokenFile> file = rdzv::ReadTokenFile(o->rdzv_token_file);
    if (!file.ok()) return Fail(kExitUsage, file.status().message(), kWho);
    sources.file = *file;
  }
  Result<std::string> token = rdzv::ChooseToken(sources);
  if (!token.ok()) return Fail(kExitUsage, token.status().message(), kWho);
  if (token->empty() && !at->host.starts_with("127.") && at->host != "localhost" && at->host != "::1")
    std::fprintf(stderr, "dlaunch coordinator: %s: no token, so anyone who reaches it can join\n",
                 at->ToString().c_str());

  // Each job is made from the first authenticated Join of its run id: its size and
  // restarts come from that agent's Hello (its own flags), the timeouts and token
  // from ours. The factory runs for every Hello, but the server creates a job only
  // once that agent has proven the token and joined (server.hpp).
  std::string endpoint = at->ToString();
  auto factory = [&, token = *token](const rdzv::Hello& hello) -> Result<rdzv::CoordinatorOptions> {
    rdzv::CoordinatorOptions c =
        CoordinatorOptionsFor(*o, hello.run_id, hello.min_nodes, hello.max_nodes, hello.max_restarts, token);
    c.endpoint = endpoint;
    return c;
  };
  EventLoop loop;
  boost::asio::io_context& io = loop.io();
  // The log goes through the console: a stalled stderr must not stop the coordinator.
  Console console(io, STDOUT_FILENO, STDERR_FILENO);
  auto say = [&console](const std::string& line) {
    console.Write(ConsoleStream::kErr, "dlaunch coordinator: " + line + "\n");
  };
  auto server = rdzv::CoordinatorServer::Start(io, *at, "--listen", factory, say);
  if (!server.ok()) return Fail(kExitUsage, server.status().message(), kWho);
  // A job whose agents all went away before it ran would otherwise stay for ever.
  (*server)->ExpireAbandonedJobs(o->join_timeout);
  say(fmt::format("listening on {}", endpoint));

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
