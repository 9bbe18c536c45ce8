// libFuzzer target: what a worker or another node hands the straggler watch,
// the samples file (ParseSamples, launcher/straggler/samples.hpp) and a
// window's Report item (WindowFromItem, launcher/straggler/node_windows.hpp).
//
// Input: the same bytes to both. Each must return a value or a Status; what
// parses stays within the bounds, and a parsed window survives its own item.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "launcher/straggler/node_windows.hpp"
#include "launcher/straggler/samples.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using dlaunch::launcher::FrameCounts;
using dlaunch::launcher::kMaxSampleKey;
using dlaunch::launcher::kMaxSampleKeys;
using dlaunch::launcher::ParseSamples;
using dlaunch::launcher::RankSamples;
using dlaunch::launcher::RankWindow;
using dlaunch::launcher::SamplesSince;
using dlaunch::launcher::WindowFromItem;
using dlaunch::launcher::WindowItem;

namespace {

void CheckCounts(const FrameCounts& counts, const char* what) {
  FUZZ_CHECK(counts.size() <= kMaxSampleKeys, std::string(what) + ": more keys than the cap");
  for (const auto& [key, n] : counts) {
    FUZZ_CHECK(!key.empty() && key.size() <= kMaxSampleKey, std::string(what) + ": a key out of bounds");
    FUZZ_CHECK(n >= 0, std::string(what) + ": a negative count");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto s = ParseSamples(text); s.ok()) {
    CheckCounts(s->user, "ParseSamples user");
    CheckCounts(s->top, "ParseSamples top");
    RankSamples d = SamplesSince(*s, RankSamples{});
    FUZZ_CHECK(d.ticks >= 0, "SamplesSince: negative ticks");
  }
  if (auto w = WindowFromItem(text); w.ok()) {
    CheckCounts(w->samples.user, "WindowFromItem user");
    CheckCounts(w->samples.top, "WindowFromItem top");
    std::string item = WindowItem(*w, 4096);
    FUZZ_CHECK(item.size() <= 4096, "WindowItem: over its cap");
    if (!item.empty()) FUZZ_CHECK(WindowFromItem(item).ok(), "WindowFromItem refused WindowItem's own item");
  }
  return 0;
}
