#include "launcher/config/command.hpp"

namespace dlaunch::launcher {

std::string PythonExecutable(const envmap::EnvMap& env) {
  auto it = env.find("PYTHON_EXEC");
  return it != env.end() && !it->second.empty() ? it->second : "python3";
}

std::vector<std::string> WorkerArgv(const Options& o, const envmap::EnvMap& env) {
  if (o.after_dashdash || o.no_python || o.np > 0) return o.command;  // -np: horovodrun's form
  std::vector<std::string> argv = {PythonExecutable(env), "-u"};
  if (o.module) {
    argv.push_back("-m");
  } else if (o.run_path) {
    // torchrun runs the script with runpy.run_path inside its own interpreter;
    // the same, in the worker's interpreter.
    argv.push_back("-c");
    argv.push_back("import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')");
  }
  argv.insert(argv.end(), o.command.begin(), o.command.end());
  return argv;
}

size_t LocalRankArgAt(const Options& o, const std::vector<std::string>& argv) {
  return o.after_dashdash || o.no_python ? argv.size() : argv.size() - o.command.size() + 1;
}

}  // namespace dlaunch::launcher
