// Head-node launch, the pure half: the command line that starts one dlaunch
// agent on a node through ssh, pdsh, or a local shell. Every value reaches the
// remote shell single-quoted, so no host, path, variable or argument is ever
// interpreted by it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/core/loopback.hpp"  // IsLoopbackName: the names the head starts without ssh

namespace dlaunch::launcher {

enum class RemoteKind { kSsh, kPdsh, kLocal };

// How the head reaches the nodes (--remote, --ssh-*).
struct RemoteOptions {
  RemoteKind kind = RemoteKind::kSsh;
  std::optional<int> port;               // --ssh-port
  std::string identity;                  // --ssh-identity
  std::vector<std::string> ssh_options;  // --ssh-option K=V, before dlaunch's own defaults
  // Default: 10s. ssh's own default waits for the kernel's SYN retries (minutes).
  int connect_timeout_s = 10;
};

// What the agent on one node runs.
struct AgentCommand {
  std::string cwd;  // empty: the login directory
  // -x NAME=VALUE; each NAME a shell identifier (the -x check ensures it).
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> argv;  // dlaunch and its arguments
  std::string token;              // the rendezvous token
  // The token and the env values go on stdin (ssh, local), so no process list
  // on the head or a node shows them: the line names the variables only. pdsh
  // forwards no stdin: they are then set inline, for every local user to see.
  bool secrets_on_stdin = true;
};

// `s` quoted for a POSIX shell: 'it'"'"'s'; a word of only letters, digits and
// @%+=:,./_- stays as it is.
std::string ShellQuote(std::string_view s);

// The one shell line the node runs, e.g. with the secrets on stdin
//   IFS= read -r DLAUNCH_RDZV_TOKEN || exit 1; export DLAUNCH_RDZV_TOKEN;
//   IFS= read -r A || exit 1; A=$(printf '%bx' "$A"); A=${A%x}; export A; cd '/w' || exit 1; exec '/bin/dlaunch' ...
// or, without, `DLAUNCH_RDZV_TOKEN='t'; export DLAUNCH_RDZV_TOKEN; ... exec env 'A=b' '/bin/dlaunch' ...`.
std::string AgentShellLine(const AgentCommand& command);

// What the head writes to the line's stdin, then closes: the token, then each
// env value in order, one a line, with `\\` for a backslash and `\n` for a
// newline (printf %b undoes both and leaves every other byte as it is). Empty
// without `secrets_on_stdin`.
std::string AgentStdin(const AgentCommand& command);

// The argv the head executes to run `shell_line` on `host`:
//   ssh   ssh -T [-o USER...] -o BatchMode=yes -o ConnectTimeout=10 [-p P] [-i KEY] -- HOST LINE
//   pdsh  pdsh -S -N -R ssh -w HOST LINE  (ssh flags through PDSH_SSH_ARGS_APPEND, see PdshEnv)
//   local /bin/sh -c LINE
std::vector<std::string> LauncherArgv(const RemoteOptions& options, const std::string& host,
                                      const std::string& shell_line);

// pdsh takes ssh's flags from the environment: {"PDSH_SSH_ARGS_APPEND", "..."}.
std::pair<std::string, std::string> PdshEnv(const RemoteOptions& options);

}  // namespace dlaunch::launcher
