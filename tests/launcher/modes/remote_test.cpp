#include "launcher/modes/remote.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

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
  for (std::string s :
       {"plain", "", "two words", "it's", "'", "a\"b", "$HOME `id` $(id) \\n *", "x y'z", "--flag=[{rank}]: "}) {
    INFO(s);
    CHECK(RunShell("printf '%s' " + ShellQuote(s)) == s);
  }
  CHECK(ShellQuote("it's") == "'it'\"'\"'s'");
  CHECK(ShellQuote("--node-rank=1,a@b:/x.y_z%+") == "--node-rank=1,a@b:/x.y_z%+");
  CHECK(ShellQuote("") == "''");
  CHECK(ShellQuote("a b") == "'a b'");
}

TEST_CASE("the agent's shell line reads the token and the values from stdin and names only the variables", "[remote]") {
  AgentCommand c;
  c.cwd = "/work dir";
  c.env = {{"GLOO_SOCKET_IFNAME", "eth0"}, {"X", "x y'z"}};
  c.argv = {"/opt/dlaunch", "--node-rank", "1", "--", "python", "train.py"};
  c.token = "s3cret";
  CHECK(AgentShellLine(c) ==
        "IFS= read -r DLAUNCH_RDZV_TOKEN || exit 1; export DLAUNCH_RDZV_TOKEN; "
        "IFS= read -r GLOO_SOCKET_IFNAME || exit 1; GLOO_SOCKET_IFNAME=$(printf '%bx' \"$GLOO_SOCKET_IFNAME\"); "
        "GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME%x}; export GLOO_SOCKET_IFNAME; "
        "IFS= read -r X || exit 1; X=$(printf '%bx' \"$X\"); X=${X%x}; export X; "
        "cd '/work dir' || exit 1; exec /opt/dlaunch --node-rank 1 -- python train.py");
  CHECK(AgentStdin(c) == "s3cret\neth0\nx y'z\n");
  c.env = {{"M", "a\\nb\nc\\"}};
  CHECK(AgentStdin(c) == "s3cret\na\\\\nb\\nc\\\\\n");
  // pdsh: no stdin, so everything inline.
  c.secrets_on_stdin = false;
  c.cwd.clear();
  c.env = {{"X", "x y'z"}};
  CHECK(AgentShellLine(c) ==
        "DLAUNCH_RDZV_TOKEN=s3cret; export DLAUNCH_RDZV_TOKEN; exec env 'X=x y'\"'\"'z' /opt/dlaunch --node-rank 1 -- "
        "python train.py");
  CHECK(AgentStdin(c).empty());
}

TEST_CASE("values on stdin arrive intact in a real shell, and the line never holds them", "[remote]") {
  // Every byte a value may hold but NUL: spaces, quotes, backslash sequences
  // printf would act on, '=', '%', newlines (trailing too), CR, non-ASCII.
  const std::vector<std::string> values = {
      "",
      "x y'z \"q\" `id` $(id) $HOME",
      "a=b=c",
      "back\\slash \\n \\c \\0101 \\\\ %s %b",
      "line1\nline2\n\n",
      "\n",
      std::string("cr\r tab\t bell\a esc\x1b high\xff"),
      "gr\xc3\xbc\xc3\x9f \xe2\x9c\x93 \xf0\x9f\x94\x91",
  };
  char dir_template[] = "/tmp/dlaunch-remote-test-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  std::string dir = dir_template;
  AgentCommand c;
  c.token = "tok";
  for (size_t i = 0; i < values.size(); ++i) c.env.emplace_back(fmt::format("DL_V{}", i), values[i]);
  // The agent here writes each value to its own file, byte for byte.
  std::string script;
  for (size_t i = 0; i < values.size(); ++i) script += fmt::format("printf '%s' \"$DL_V{0}\" >{1}/v{0}; ", i, dir);
  script += fmt::format("printf '%s' \"$DLAUNCH_RDZV_TOKEN\" >{}/token", dir);
  c.argv = {"/bin/sh", "-c", script};
  std::string line = AgentShellLine(c);
  for (const std::string& v : values)
    if (v.size() > 2) CHECK(line.find(v) == std::string::npos);
  {
    std::ofstream in(dir + "/stdin", std::ios::binary);
    in << AgentStdin(c);
  }
  std::string cmd = "/bin/sh -c " + ShellQuote(line) + " <" + dir + "/stdin";
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto slurp = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  for (size_t i = 0; i < values.size(); ++i) {
    INFO(i);
    CHECK(slurp(fmt::format("{}/v{}", dir, i)) == values[i]);
  }
  CHECK(slurp(dir + "/token") == "tok");
  std::filesystem::remove_all(dir);
}

TEST_CASE("the shell line runs as written in a real shell", "[remote]") {
  AgentCommand c;
  c.cwd = "/";
  c.env = {{"DL_X", "x y'z"}};
  c.argv = {"/bin/sh", "-c", "printf '%s|%s|%s' \"$DL_X\" \"$DLAUNCH_RDZV_TOKEN\" \"$(pwd)\""};
  c.token = "tok";
  c.secrets_on_stdin = false;
  CHECK(RunShell(AgentShellLine(c)) == "x y'z|tok|/");
}

TEST_CASE("ssh, pdsh and local argv; the user's -o comes before dlaunch's defaults", "[remote]") {
  RemoteOptions o;
  o.port = 2222;
  o.identity = "/k/id";
  o.ssh_options = {"ConnectTimeout=2", "StrictHostKeyChecking=no"};
  CHECK(LauncherArgv(o, "n1", "LINE") == std::vector<std::string>{"ssh", "-T", "-o", "ConnectTimeout=2", "-o",
                                                                  "StrictHostKeyChecking=no", "-o", "BatchMode=yes",
                                                                  "-o", "ConnectTimeout=10", "-p", "2222", "-i",
                                                                  "/k/id", "--", "n1", "LINE"});
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
