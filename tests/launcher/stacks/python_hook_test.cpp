#include "launcher/stacks/python_hook.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "launcher/stacks/stacks.hpp"
#include "tests/temp_dir.hpp"

namespace dlaunch::launcher {
namespace {

std::string HookFileText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("the Python hook is prepended to PYTHONPATH, with its dump directory and signal", "[python_hook]") {
  envmap::EnvMap env = {{"PYTHONPATH", "/mine"}};
  AddPythonHook(env, "/run/py", "/run/stacks");
  CHECK(env["PYTHONPATH"] == "/run/py:/mine");
  CHECK(env["DLAUNCH_STACKS_DIR"] == "/run/stacks");
  CHECK(env["DLAUNCH_STACKS_SIGNAL"] == std::to_string(StackSignal()));
  CHECK(StackSignal() != SIGUSR1);
  CHECK(StackSignal() != SIGUSR2);
  envmap::EnvMap none;
  AddPythonHook(none, "/run/py", "/run/stacks");
  CHECK(none["PYTHONPATH"] == "/run/py");
}

TEST_CASE("the sampler is turned on by its period and flush, in whole milliseconds", "[python_hook]") {
  envmap::EnvMap env;
  AddPythonHook(env, "/run/py", "/run/stacks");
  AddSampler(env, std::chrono::milliseconds(100), std::chrono::seconds(5));
  CHECK(env["DLAUNCH_SAMPLE_PERIOD_MS"] == "100");
  CHECK(env["DLAUNCH_SAMPLE_FLUSH_MS"] == "5000");
  CHECK(env["DLAUNCH_STACKS_DIR"] == "/run/stacks");  // where the samples go
  CHECK(env.size() == 5);
  // The names the hook reads (stack_hook.py, tested by stack_hook_test.py).
  for (const auto& [name, value] : env)
    if (name.starts_with("DLAUNCH_SAMPLE_")) CHECK(PythonHookSource().find(name) != std::string_view::npos);
  // Off: none, not even what the launcher itself inherited.
  AddSampler(env, std::chrono::milliseconds(0), std::chrono::seconds(5));
  CHECK(env.count("DLAUNCH_SAMPLE_PERIOD_MS") == 0);
  CHECK(env.count("DLAUNCH_SAMPLE_FLUSH_MS") == 0);
}

TEST_CASE("a command gets the hook when it names Python", "[python_hook]") {
  struct Case {
    std::string exe;
    std::vector<std::string> argv;
    bool python;
  };
  std::vector<Case> cases = {
      {"/usr/bin/python3", {"python3", "-c", "pass"}, true},
      {"/usr/bin/python3.11", {"/usr/bin/python3.11", "train.py"}, true},
      {"/opt/conda/bin/python", {"python", "-m", "torch.distributed.run"}, true},
      {"/usr/bin/pypy3", {"pypy3", "x.py"}, true},
      {"/usr/bin/env", {"env", "python3", "train.py"}, true},
      {"/usr/bin/numactl", {"numactl", "--cpunodebind=0", "/usr/bin/python3", "t.py"}, true},
      {"/bin/sh", {"sh", "-c", "cd /w && exec python3 train.py"}, true},
      {"/usr/local/bin/Python", {"Python", "x.py"}, true},  // macOS framework builds' spelling
      {"/usr/bin/true", {"true"}, false},
      {"/bin/sleep", {"sleep", "1"}, false},
      {"/bin/sh", {"sh", "-c", "echo $RANK"}, false},
      {"/bin/bash", {"bash", "run.sh"}, true},  // a wrapper script may start Python
      {"/usr/bin/dash", {"dash", "-e", "run.sh"}, true},
      {"/bin/bash", {"bash", "-e", "-c", "exec ./train"}, false},
      {"/home/u/bin/train", {"train", "--lr", "0.1"}, false},
  };
  for (const Case& c : cases) {
    INFO(c.exe << " " << c.argv.back());
    CHECK(CommandNamesPython(c.exe, c.argv) == c.python);
  }
  // The program's name, not the directories above it: a native program in a
  // directory named after Python is judged by its arguments alone.
  CHECK_FALSE(CommandNamesPython("/opt/python-tools/bin/worker", {"worker"}));
}

TEST_CASE("a script gets the hook when its #! lines name Python", "[python_hook]") {
  CHECK(ShebangNamesPython("#!/usr/bin/python3\n# -*- coding: utf-8 -*-\nimport re\n"));
  CHECK(ShebangNamesPython("#!/usr/bin/env python3\n"));
  CHECK(ShebangNamesPython(
      "#!/bin/sh\n'''exec' '/very/long/venv/bin/python3' \"$0\" \"$@\"\n' '''\n"));  // pip's trampoline
  // A shell script may start Python, whatever its first 512 bytes say.
  CHECK(ShebangNamesPython("#!/bin/bash\necho hello\n"));
  CHECK(ShebangNamesPython("#!/usr/bin/env sh\nexec ./train\n"));
  CHECK(ShebangNamesPython("#! /bin/dash -e"));
  CHECK_FALSE(ShebangNamesPython("#!/usr/bin/perl -w\nprint 1;\n"));
  CHECK_FALSE(ShebangNamesPython("#!/usr/bin/env node\n"));
  CHECK_FALSE(ShebangNamesPython("#!/bin/shell-tool\n"));
  CHECK_FALSE(ShebangNamesPython("#!"));
  CHECK_FALSE(
      ShebangNamesPython("\x7f"
                         "ELF\x02\x01\x01 python in a native program's bytes"));
  CHECK_FALSE(ShebangNamesPython(""));
}

TEST_CASE("ReadHead reads the first 512 bytes, or nothing", "[python_hook]") {
  testing::TempDir dir("hook-head");
  std::string path = dir.path + "/script";
  std::ofstream(path) << "#!/usr/bin/env python3\n" << std::string(1000, 'x');
  std::string head = ReadHead(path);
  CHECK(head.size() == 512);
  CHECK(head.starts_with("#!/usr/bin/env python3\n"));
  CHECK(ReadHead(dir.path + "/missing").empty());
}

TEST_CASE("the hook's directory is named after its source", "[python_hook]") {
  std::string dir = PythonHookDir("/run/user/1000/dlaunch");
  REQUIRE(dir.starts_with("/run/user/1000/dlaunch/hook-"));
  CHECK(dir.size() == std::string("/run/user/1000/dlaunch/hook-").size() + 16);
  CHECK(PythonHookDir("/run/user/1000/dlaunch") == dir);
  // Everything the worker runs at start, and the header dlaunch waits for.
  std::string_view src = PythonHookSource();
  CHECK(src.find("faulthandler.register(signum, file=fd, all_threads=True, chain=False)") != std::string_view::npos);
  CHECK(src.find("dlaunch: main thread 0x%016x fd %d") != std::string_view::npos);
  CHECK(src.find("path.abspath(") == std::string_view::npos);  // no walk of sys.path at start
}

TEST_CASE("the hook's source is stack_hook.py, byte for byte", "[python_hook]") {
  // The file the build embeds (and stack_hook_test.py tests) is what workers run.
  std::string file = HookFileText(DLAUNCH_SOURCE_DIR "/launcher/stacks/stack_hook.py");
  REQUIRE(file.size() > 1000);
  CHECK(PythonHookSource() == file);
}

TEST_CASE("WritePythonHook writes the hook once and mends a changed one", "[python_hook]") {
  testing::TempDir dir("hook-write");
  std::string hook = PythonHookDir(dir.path);
  std::string file = hook + "/sitecustomize.py";
  REQUIRE(WritePythonHook(hook).ok());
  CHECK(HookFileText(file) == PythonHookSource());
  struct stat st {};
  REQUIRE(stat(hook.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  SECTION("the same text is left alone, so Python's cached bytecode stays valid") {
    ino_t inode = st.st_ino;
    REQUIRE(WritePythonHook(hook).ok());
    REQUIRE(stat(file.c_str(), &st) == 0);
    CHECK(st.st_ino == inode);
  }
  SECTION("a changed, cut or missing file is written again, whole") {
    for (std::string text :
         {std::string(PythonHookSource()) + "print('x')\n", std::string("import os\n"), std::string()}) {
      if (text.empty())
        std::filesystem::remove(file);
      else
        std::ofstream(file, std::ios::trunc) << text;
      REQUIRE(WritePythonHook(hook).ok());
      CHECK(HookFileText(file) == PythonHookSource());
    }
    // No temporary file is left behind.
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(hook)) files += e.is_regular_file() ? 1 : 0;
    CHECK(files == 1);
  }
  SECTION("a symbolic link in its place is replaced, never followed") {
    std::string elsewhere = dir.path + "/elsewhere.py";
    std::ofstream(elsewhere) << "mine\n";
    std::filesystem::remove(file);
    std::filesystem::create_symlink(elsewhere, file);
    REQUIRE(WritePythonHook(hook).ok());
    CHECK(HookFileText(elsewhere) == "mine\n");
    CHECK_FALSE(std::filesystem::is_symlink(file));
    CHECK(HookFileText(file) == PythonHookSource());
  }
}

TEST_CASE("WritePythonHook refuses a directory others can write", "[python_hook]") {
  testing::TempDir dir("hook-refuse");
  std::string hook = dir.path + "/hook-open";
  REQUIRE(mkdir(hook.c_str(), 0777) == 0);
  REQUIRE(chmod(hook.c_str(), 0777) == 0);
  Status s = WritePythonHook(hook);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message() == hook + ": refused (mode 0777 lets other users write; 0700 expected)");
  CHECK_FALSE(std::filesystem::exists(hook + "/sitecustomize.py"));
}

}  // namespace dlaunch::launcher
