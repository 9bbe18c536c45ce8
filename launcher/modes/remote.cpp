#include "launcher/modes/remote.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rendezvous/auth.hpp"

namespace dlaunch::launcher {
namespace {

// ssh's flags, without the host: the user's -o first, since ssh keeps the first
// value it is given for each option and the user's must win over our defaults.
std::vector<std::string> SshFlags(const RemoteOptions& o) {
  std::vector<std::string> flags;
  for (const std::string& opt : o.ssh_options) {
    flags.push_back("-o");
    flags.push_back(opt);
  }
  // BatchMode: a node that wants a password fails at once instead of hanging on a prompt.
  flags.insert(flags.end(), {"-o", "BatchMode=yes", "-o", fmt::format("ConnectTimeout={}", o.connect_timeout_s)});
  if (o.port) {
    flags.push_back("-p");
    flags.push_back(fmt::format("{}", *o.port));
  }
  if (!o.identity.empty()) {
    flags.push_back("-i");
    flags.push_back(o.identity);
  }
  return flags;
}

}  // namespace

std::string ShellQuote(std::string_view s) {
  // Words of only these characters mean the same to every POSIX shell unquoted
  // (as Python's shlex.quote has it), which keeps --explain readable.
  auto safe = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("@%+=:,./_-", c) != nullptr;
  };
  if (!s.empty() && std::all_of(s.begin(), s.end(), safe)) return std::string(s);
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\"'\"'";
    else
      out += c;
  }
  out += "'";
  return out;
}

std::string AgentShellLine(const AgentCommand& c) {
  const char* var = rendezvous::kTokenEnvVar;
  std::string line;
  if (!c.token.empty()) {
    line = c.secrets_on_stdin ? fmt::format("IFS= read -r {0} || exit 1; export {0}; ", var)
                              : fmt::format("{}={}; export {}; ", var, ShellQuote(c.token), var);
  }
  if (c.secrets_on_stdin) {
    // `read` takes one line; printf %b turns the escaped newlines and
    // backslashes back, and the trailing x keeps the newlines a command
    // substitution would strip. Both are builtins, and a subshell's command
    // line is this one: the value shows in no process list.
    for (const auto& [name, value] : c.env)
      line +=
          fmt::format("IFS= read -r {0} || exit 1; {0}=$(printf '%bx' \"${0}\"); {0}=${{{0}%x}}; export {0}; ", name);
  }
  if (!c.cwd.empty()) line += fmt::format("cd {} || exit 1; ", ShellQuote(c.cwd));
  line += "exec";
  if (!c.secrets_on_stdin && !c.env.empty()) {
    line += " env";
    for (const auto& [name, value] : c.env) line += " " + ShellQuote(name + "=" + value);
  }
  for (const std::string& a : c.argv) line += " " + ShellQuote(a);
  return line;
}

std::string AgentStdin(const AgentCommand& c) {
  if (!c.secrets_on_stdin) return "";
  std::string out;
  if (!c.token.empty()) out += c.token + "\n";
  for (const auto& [name, value] : c.env) {
    for (char ch : value) {
      if (ch == '\\')
        out += "\\\\";
      else if (ch == '\n')
        out += "\\n";
      else
        out += ch;
    }
    out += '\n';
  }
  return out;
}

std::vector<std::string> LauncherArgv(const RemoteOptions& o, const std::string& host, const std::string& shell_line) {
  switch (o.kind) {
    case RemoteKind::kLocal:
      return {"/bin/sh", "-c", shell_line};
    case RemoteKind::kPdsh:
      // -S: exit with the remote command's code; -N: no "host: " prefix (the
      // agents tag their own lines).
      return {"pdsh", "-S", "-N", "-R", "ssh", "-w", host, shell_line};
    case RemoteKind::kSsh:
      break;
  }
  std::vector<std::string> argv = {"ssh", "-T"};
  for (std::string& f : SshFlags(o)) argv.push_back(std::move(f));
  argv.insert(argv.end(), {"--", host, shell_line});
  return argv;
}

std::pair<std::string, std::string> PdshEnv(const RemoteOptions& o) {
  // pdsh splits this on white space and quotes nothing: a value with a space
  // cannot go through it.
  return {"PDSH_SSH_ARGS_APPEND", fmt::format("{}", fmt::join(SshFlags(o), " "))};
}

}  // namespace dlaunch::launcher
