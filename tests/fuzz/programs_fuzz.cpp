// libFuzzer target: DLAUNCH_PROGRAMS, the groups a head sends its agents
// (DecodePrograms, launcher/config/programs_codec.hpp).
//
// Input: the variable's value. The decoder must return the groups or a
// Status of one line; groups it returns encode and decode to the same groups.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "launcher/config/programs_codec.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using dlaunch::launcher::DecodePrograms;
using dlaunch::launcher::EncodePrograms;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto plan = DecodePrograms(text);
  if (!plan.ok()) {
    FUZZ_CHECK(plan.status().message().starts_with("DLAUNCH_PROGRAMS: "), "a message without the variable's name");
    FUZZ_CHECK(plan.status().message().find('\n') == std::string::npos, "a message of more than one line");
    return 0;
  }
  FUZZ_CHECK(!plan->groups.empty() && plan->per_node.size() == plan->groups.size(), "groups without their counts");
  for (const auto& row : plan->node_counts) FUZZ_CHECK(row.size() == plan->groups.size(), "a node row too short");
  auto again = DecodePrograms(EncodePrograms(*plan));
  FUZZ_CHECK(again.ok(), "what the encoder wrote does not decode");
  FUZZ_CHECK(EncodePrograms(*again) == EncodePrograms(*plan), "the groups change on the way");
  return 0;
}
