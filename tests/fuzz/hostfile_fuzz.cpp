// libFuzzer target: the hostfile, -H and --include/--exclude parsers
// (launcher/config/hostfile.hpp).
//
// Input: NUL-separated fields: hostfile text, -H list, --include, --exclude
// (missing fields are empty). Each parser must return a value or a Status; what
// parses goes through FilterHosts and WorkersOn, whose results must be sane.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "launcher/config/hostfile.hpp"
#include "tests/fuzz/fuzz_check.hpp"
#include "tests/fuzz/split.hpp"

using dlaunch::launcher::FilterHosts;
using dlaunch::launcher::HostEntry;
using dlaunch::launcher::ParseHostfile;
using dlaunch::launcher::ParseHostList;
using dlaunch::launcher::WorkersOn;

namespace {

void CheckHosts(const std::vector<HostEntry>& hosts, const char* what) {
  FUZZ_CHECK(!hosts.empty(), std::string(what) + " returned no hosts without an error");
  for (const HostEntry& h : hosts) {
    FUZZ_CHECK(!h.host.empty(), std::string(what) + " returned an empty host name");
    FUZZ_CHECK(!h.slots || *h.slots >= 0, std::string(what) + " returned a negative slot count");
    FUZZ_CHECK(WorkersOn(h, false, 1) >= 0, std::string(what) + ": WorkersOn is negative");
  }
}

void Filter(const std::vector<HostEntry>& hosts, const std::string& include, const std::string& exclude) {
  auto filtered = FilterHosts(hosts, include, exclude);
  if (filtered.ok()) CheckHosts(*filtered, "FilterHosts");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> f = dlaunch::fuzz::SplitAtNul(data, size, 4);
  f.resize(4);
  auto from_file = ParseHostfile(f[0], "fuzz.txt");
  if (from_file.ok()) {
    CheckHosts(*from_file, "ParseHostfile");
    Filter(*from_file, f[2], f[3]);
  }
  auto from_list = ParseHostList(f[1], "-H");
  if (from_list.ok()) {
    CheckHosts(*from_list, "ParseHostList");
    Filter(*from_list, f[2], f[3]);
  }
  return 0;
}
