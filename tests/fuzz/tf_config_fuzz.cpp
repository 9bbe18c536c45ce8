// libFuzzer target: TF_CONFIG and TF roles.
//
// Input: NUL-separated fields: a --roles value, a TF_CONFIG text, then any number
// of --role-env values. TF_CONFIG goes through envmap::Detect; the roles through
// ParseCommandLine, and when they parse, into a one-node layout that Validate
// checks. A valid layout's TF_CONFIG for every worker must detect again, as that
// worker's own launcher would read it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "envmap/detect.hpp"
#include "envmap/layout.hpp"
#include "envmap/worker_env.hpp"
#include "launcher/config/cli.hpp"
#include "tests/fuzz/fuzz_check.hpp"
#include "tests/fuzz/split.hpp"

namespace envmap = dlaunch::envmap;

namespace {

void CheckDetected(const envmap::Detected& d, const char* what) {
  FUZZ_CHECK(d.nnodes >= 0, std::string(what) + ": a negative node count");
  FUZZ_CHECK(d.node_rank >= 0 && (d.nnodes == 0 || d.node_rank < d.nnodes),
             std::string(what) + ": node rank outside the cluster");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> f = dlaunch::fuzz::SplitAtNul(data, size);
  f.resize(std::max<std::size_t>(f.size(), 2));

  auto detected = envmap::Detect({{"TF_CONFIG", f[1]}});
  if (detected.ok()) CheckDetected(*detected, "Detect(TF_CONFIG)");

  std::vector<std::string> args = {"--roles", f[0]};
  for (std::size_t i = 2; i < f.size(); ++i) {
    args.push_back("--role-env");
    args.push_back(f[i]);
  }
  args.insert(args.end(), {"--", "true"});
  auto options = dlaunch::launcher::ParseCommandLine(args, {});
  if (!options.ok()) return 0;

  // One node as main() builds it: as many workers as the roles ask for (when that
  // is small enough to run), each with its own task port.
  long long wanted = 0;
  for (const envmap::RoleSpec& r : options->roles) wanted += r.count;
  const int nproc = wanted >= 1 && wanted <= 64 ? static_cast<int>(wanted) : 4;
  envmap::JobLayout layout;
  envmap::Node node{"n0", "127.0.0.1", nproc, {}};
  for (int i = 0; i < nproc; ++i) node.task_ports.push_back(20000 + i);
  layout.nodes.push_back(node);
  layout.master_addr = "127.0.0.1";
  layout.master_port = 29500;
  layout.run_id = "fuzz";
  layout.roles = options->roles;
  if (!envmap::Validate(layout).ok()) return 0;

  for (const envmap::WorkerSlot& slot : envmap::LocalSlots(layout)) {
    std::string tf_config = envmap::TfConfig(layout, slot);
    auto again = envmap::Detect({{"TF_CONFIG", tf_config}});
    FUZZ_CHECK(again.ok(), "dlaunch's own TF_CONFIG does not detect: " + again.status().message() + " in " + tf_config);
    CheckDetected(*again, "Detect(TfConfig)");
  }
  return 0;
}
