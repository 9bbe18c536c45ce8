// libFuzzer target: srun's --multi-prog file (ParseMultiProg,
// launcher/config/multi_prog.hpp).
//
// Input: one byte, the world size less one (1 to 256 ranks), then the file's
// text. The parser must return a table or a Status; a table gives every rank
// one group, every group a rank and a program, and each group its line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/config/multi_prog.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using dlaunch::launcher::kMaxMultiProgLine;
using dlaunch::launcher::ParseMultiProg;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int world_size = data[0] + 1;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto table = ParseMultiProg(text, "fuzz.conf", world_size);
  if (!table.ok()) {
    FUZZ_CHECK(table.status().message().starts_with("multi-prog fuzz.conf"), "a message without the file's name");
    FUZZ_CHECK(table.status().message().find('\n') == std::string::npos, "a message of more than one line");
    return 0;
  }
  FUZZ_CHECK(table->group_of.size() == static_cast<std::size_t>(world_size), "group_of is not the world's size");
  FUZZ_CHECK(!table->groups.empty(), "a table without a group");
  std::vector<int> ranks(table->groups.size(), 0);
  for (int g : table->group_of) {
    FUZZ_CHECK(g >= 0 && static_cast<std::size_t>(g) < table->groups.size(), "a rank without a group");
    ++ranks[static_cast<std::size_t>(g)];
  }
  for (std::size_t i = 0; i < table->groups.size(); ++i) {
    const auto& group = table->groups[i];
    FUZZ_CHECK(ranks[i] > 0, "a group without a rank");
    FUZZ_CHECK(!group.argv.empty() && !group.argv[0].empty(), "a group without a program");
    FUZZ_CHECK(group.local_rank_arg_at == group.argv.size() && group.expand, "a group not run as written");
    FUZZ_CHECK(group.role.starts_with("line") && group.line == "fuzz.conf:" + group.role.substr(4),
               "a group whose role is not its line");
    std::size_t bytes = 0;
    for (const std::string& arg : group.argv) bytes += arg.size();
    // A quoted '%' doubles, so a line's words hold at most twice its bytes.
    FUZZ_CHECK(bytes <= 2 * kMaxMultiProgLine, "more argument bytes than a line holds");
    if (i > 0)
      FUZZ_CHECK(std::stoi(group.role.substr(4)) > std::stoi(table->groups[i - 1].role.substr(4)),
                 "groups out of the file's order");
  }
  return 0;
}
