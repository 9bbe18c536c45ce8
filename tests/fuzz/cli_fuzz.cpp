// libFuzzer target: the command-line parser (launcher/config/cli.hpp ParseCommandLine).
//
// Input: the arguments, separated by NUL bytes. An argument "PET_NAME=VALUE"
// goes into the environment snapshot instead (torchrun's flag defaults). The
// parser must return Options or one Status line; a parsed Redirects/tee spec must
// give a stream set for any local rank.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "launcher/config/cli.hpp"
#include "tests/fuzz/fuzz_check.hpp"
#include "tests/fuzz/split.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args;
  dlaunch::envmap::EnvMap env;
  for (std::string& field : dlaunch::fuzz::SplitAtNul(data, size)) {
    std::size_t eq = field.find('=');
    if (field.rfind("PET_", 0) == 0 && eq != std::string::npos) {
      env[field.substr(0, eq)] = field.substr(eq + 1);
    } else {
      args.push_back(std::move(field));
    }
  }
  auto options = dlaunch::launcher::ParseCommandLine(args, env);
  if (!options.ok()) {
    FUZZ_CHECK(!options.status().message().empty(), "an error without a message");
    return 0;
  }
  for (int rank : {0, 1, 7}) {
    FUZZ_CHECK(dlaunch::launcher::StdFor(options->redirects, rank) >= 0, "an accepted --redirects is malformed");
    FUZZ_CHECK(dlaunch::launcher::StdFor(options->tee, rank) >= 0, "an accepted --tee is malformed");
  }
  FUZZ_CHECK(options->min_nodes >= 1 && options->min_nodes <= options->max_nodes, "accepted --nnodes out of order");
  FUZZ_CHECK(options->nproc >= 1, "accepted a --nproc-per-node below 1");
  FUZZ_CHECK(options->shutdown_timeout.count() >= 0, "accepted a negative --shutdown-timeout");
  FUZZ_CHECK(options->join_timeout.count() > 0 && options->last_call_timeout.count() > 0 &&
                 options->heartbeat_timeout.count() > 0,
             "accepted a --rdzv-conf timeout that is not positive");
  return 0;
}
