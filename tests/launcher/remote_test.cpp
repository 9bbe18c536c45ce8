#include "launcher/modes/remote.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

namespace dlaunch::launcher {
namespace {

// Runs `line` in a real /bin/sh and returns what it prints.
std::string RunShell(const std::string& line) {
  std::string cmd = "/bin/sh -c " + ShellQuote(line);
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[256];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

}  // namespace

TEST_CASE("ShellQuote survives a real shell unchanged", "[remote]") {
  for (std::string s : {"plain", "", "two words", "it's", "'", "a\"b", "$HOME `id` $(id) \\n *", "x y'z", "--flag=[{rank}]: "}) {
    INFO(s);
    CHECK(RunShell("printf '%s' " + ShellQuote(s)) == s);
  }
  CHECK(ShellQuote("it's") == "'it'\"'\"'s'");
  CHECK(ShellQuote("--node-rank=1,a@b:/x.y_z%+") == "--node-rank=1,a@b:/x.y_z%+");
  CHECK(ShellQuote("") == "''");
  CHECK(ShellQuote("a b") == "'a b'");
}

TEST_CASE("the agent's shell line reads the token from stdin and quotes every value", "[remote]") {
  AgentCommand c;
  c.cwd = "/work dir";
  c.env = {{"GLOO_SOCKET_IFNAME", "eth0"}, {"X", "x y'z"}};
  c.argv = {"/opt/dlaunch", "--node-rank", "1", "--", "python", "train.py"};
  c.token = "s3cret";
  CHECK(AgentShellLine(c) ==
        "IFS= read -r DLAUNCH_RDZV_TOKEN || exit 1; export DLAUNCH_RDZV_TOKEN; cd '/work dir' || exit 1; "
        "exec env GLOO_SOCKET_IFNAME=eth0 'X=x y'\"'\"'z' /opt/dlaunch --node-rank 1 -- python train.py");
  c.token_on_stdin = false;
  c.cwd.clear();
  c.env.clear();
  CHECK(AgentShellLine(c) ==
        "DLAUNCH_RDZV_TOKEN=s3cret; export DLAUNCH_RDZV_TOKEN; exec /opt/dlaunch --node-rank 1 -- python train.py");
}

TEST_CASE("the shell line runs as written in a real shell", "[remote]") {
  AgentCommand c;
  c.cwd = "/";
  c.env = {{"DL_X", "x y'z"}};
  c.argv = {"/bin/sh", "-c", "printf '%s|%s|%s' \"$DL_X\" \"$DLAUNCH_RDZV_TOKEN\" \"$(pwd)\""};
  c.token = "tok";
  c.token_on_stdin = false;
  CHECK(RunShell(AgentShellLine(c)) == "x y'z|tok|/");
}

TEST_CASE("ssh, pdsh and local argv; the user's -o comes before dlaunch's defaults", "[remote]") {
  RemoteOptions o;
  o.port = 2222;
  o.identity = "/k/id";
  o.ssh_options = {"ConnectTimeout=2", "StrictHostKeyChecking=no"};
  CHECK(LauncherArgv(o, "n1", "LINE") ==
        std::vector<std::string>{"ssh", "-T", "-o", "ConnectTimeout=2", "-o", "StrictHostKeyChecking=no", "-o",
                                 "BatchMode=yes", "-o", "ConnectTimeout=10", "-p", "2222", "-i", "/k/id", "--", "n1",
                                 "LINE"});
  o.kind = RemoteKind::kPdsh;
  CHECK(LauncherArgv(o, "n1", "LINE") == std::vector<std::string>{"pdsh", "-S", "-N", "-R", "ssh", "-w", "n1", "LINE"});
  CHECK(PdshEnv(o).first == "PDSH_SSH_ARGS_APPEND");
  CHECK(PdshEnv(o).second ==
        "-o ConnectTimeout=2 -o StrictHostKeyChecking=no -o BatchMode=yes -o ConnectTimeout=10 -p 2222 -i /k/id");
  o.kind = RemoteKind::kLocal;
  CHECK(LauncherArgv(o, "localhost", "LINE") == std::vector<std::string>{"/bin/sh", "-c", "LINE"});
}

TEST_CASE("loopback names are started without ssh", "[remote]") {
  for (const char* h : {"localhost", "127.0.0.1", "127.0.0.2", "::1"}) CHECK(IsLoopbackName(h));
  for (const char* h : {"node1", "10.0.0.1", "127", "localhost2", "my127.0.0.1"}) CHECK_FALSE(IsLoopbackName(h));
}

}  // namespace dlaunch::launcher
