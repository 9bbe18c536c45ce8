#include "launcher/config/command.hpp"

#include <catch2/catch.hpp>

using namespace dlaunch::launcher;
using Argv = std::vector<std::string>;

namespace {
Argv ArgvFor(Argv args, const dlaunch::envmap::EnvMap& env = {}) {
  auto o = ParseCommandLine(args, env);
  REQUIRE(o.ok());
  return WorkerArgv(*o, env);
}
}  // namespace

TEST_CASE("torchrun form prepends the interpreter with -u", "[command]") {
  CHECK(ArgvFor({"--nproc_per_node=2", "train.py", "--lr", "0.1"}) == Argv{"python3", "-u", "train.py", "--lr", "0.1"});
  CHECK(ArgvFor({"train.py"}, {{"PYTHON_EXEC", "/usr/bin/python3"}}) == Argv{"/usr/bin/python3", "-u", "train.py"});
}

TEST_CASE("-m runs a module, --run-path uses runpy", "[command]") {
  CHECK(ArgvFor({"-m", "pkg.train", "--x"}) == Argv{"python3", "-u", "-m", "pkg.train", "--x"});
  Argv rp = ArgvFor({"--run-path", "/abs/train.py", "a"});
  REQUIRE(rp.size() == 6);
  CHECK(rp[2] == "-c");
  CHECK(rp[3].find("runpy.run_path(sys.argv[0]") != std::string::npos);
  CHECK(Argv(rp.begin() + 4, rp.end()) == Argv{"/abs/train.py", "a"});
}

TEST_CASE("--no-python and anything after -- run exactly as given", "[command]") {
  CHECK(ArgvFor({"--no-python", "./run.sh", "x"}) == Argv{"./run.sh", "x"});
  CHECK(ArgvFor({"--nproc-per-node", "2", "--", "train.py", "--local-rank=9"}) == Argv{"train.py", "--local-rank=9"});
}
