// libFuzzer target: the job spec reader (launcher/config/job_spec.hpp).
//
// Input: NUL-separated fields: the YAML text, then --set values. Every input
// must give a spec or one InvalidArgument naming the file; a spec must be sane
// (at least one instance, counts in range, TF one task per instance).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "launcher/config/job_spec.hpp"
#include "tests/fuzz/fuzz_check.hpp"
#include "tests/fuzz/split.hpp"

using dlaunch::Code;
using dlaunch::launcher::JobKind;
using dlaunch::launcher::JobSpec;
using dlaunch::launcher::ParseJobSpec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> fields = dlaunch::fuzz::SplitAtNul(data, size, 4);
  std::string text = fields.empty() ? "" : fields[0];
  std::vector<std::string> sets(fields.size() > 1 ? fields.begin() + 1 : fields.end(), fields.end());
  auto spec = ParseJobSpec(text, "spec.yml", sets);
  if (!spec.ok()) {
    FUZZ_CHECK(spec.status().code() == Code::kInvalidArgument, "an error that is not InvalidArgument");
    std::string m = spec.status().message();  // status() is a copy
    FUZZ_CHECK(m.rfind("spec.yml", 0) == 0 || m.rfind("--set", 0) == 0,
               "an error that names neither the file nor --set: " + m);
    return 0;
  }
  const JobSpec& s = *spec;
  FUZZ_CHECK(s.instances >= 1 && s.instances <= 65536, "instances out of range");
  FUZZ_CHECK(!s.processes || (*s.processes >= 1 && *s.processes <= 65536), "processes out of range");
  FUZZ_CHECK(!s.command.empty(), "a spec without a command");
  if (s.kind == JobKind::kTensorFlow) {
    int tasks = 0;
    for (const auto& r : s.roles) {
      FUZZ_CHECK(r.count >= 1 || r.name == "ps", "a role with no task");
      tasks += r.count;
    }
    FUZZ_CHECK(tasks == s.instances, "TF tasks do not match the instances");
  }
  FUZZ_CHECK(s.WorldSize() >= 1, "an empty world");
  return 0;
}
