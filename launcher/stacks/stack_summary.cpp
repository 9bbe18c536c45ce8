// What a hang report shows of the ranks' stacks (stacks.hpp): a frame and a
// thread rendered, the ranks grouped by where they wait (HangSummary), and
// every stack in full (FullStacks).
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "launcher/core/text.hpp"
#include "launcher/stacks/stacks.hpp"

namespace dlaunch::launcher {

std::string Frame::Render() const {
  if (file.empty()) return function;
  if (line <= 0) return fmt::format("{} ({})", function, file);
  return fmt::format("{} ({}:{})", function, file, line);
}

const ThreadStack* RankStack::Main() const {
  for (const ThreadStack& t : threads)
    if (t.main) return &t;
  return threads.empty() ? nullptr : &threads.front();
}

namespace {

struct Group {
  std::string where;  // the innermost frames, rendered
  std::vector<int> ranks;
};

std::string Where(const RankStack& s, int depth) {
  const ThreadStack* t = s.Main();
  if (t == nullptr || t->frames.empty()) return "(no frames)";
  std::string out;
  for (int i = 0; i < depth && i < static_cast<int>(t->frames.size()); ++i) {
    if (i > 0) out += " <- ";
    out += t->frames[static_cast<size_t>(i)].Render();
  }
  return out;
}

// The sampled ranks grouped by where they are, the largest group first (ties:
// the group of the lowest rank first).
std::vector<Group> Groups(const std::vector<RankStack>& stacks, int depth) {
  std::vector<Group> groups;
  for (const RankStack& s : stacks) {
    if (!s.error.empty()) continue;
    std::string where = Where(s, depth);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.where == where; });
    if (it == groups.end())
      groups.push_back(Group{where, {s.rank}});
    else
      it->ranks.push_back(s.rank);
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Group& a, const Group& b) { return a.ranks.size() > b.ranks.size(); });
  return groups;
}

std::string RanksWord(const std::vector<int>& ranks) {
  return fmt::format("{} {} ({})", ranks.size() == 1 ? "rank" : "ranks", RankRanges(ranks), ranks.size());
}

}  // namespace

std::vector<int> OddRanks(const std::vector<RankStack>& stacks, int depth) {
  std::vector<Group> groups = Groups(stacks, depth);
  if (groups.size() < 2) return {};
  // The smallest group, when it is the only one that small.
  if (groups[groups.size() - 1].ranks.size() == groups[groups.size() - 2].ranks.size()) return {};
  return groups.back().ranks;
}

std::vector<std::string> HangSummary(const std::vector<RankStack>& stacks, int depth, std::string_view label) {
  std::vector<std::string> lines;
  std::vector<Group> groups = Groups(stacks, depth);
  std::vector<int> odd = OddRanks(stacks, depth);
  for (size_t i = 0; i < groups.size(); ++i) {
    const Group& g = groups[i];
    std::string verb = i == 0 ? "wait in" : g.ranks.size() == 1 ? "is elsewhere:" : "are elsewhere:";
    std::string mark = !odd.empty() && g.ranks == odd ? "   <- odd one out" : "";
    lines.push_back(fmt::format("{}: {} {} {}{}", label, RanksWord(g.ranks), verb, g.where, mark));
  }
  for (const RankStack& s : stacks)
    if (!s.error.empty())
      lines.push_back(fmt::format("{}: rank {} (pid {}): not sampled ({})", label, s.rank, s.pid, s.error));
  return lines;
}

std::string FullStacks(const std::vector<RankStack>& stacks) {
  std::string out;
  for (const RankStack& s : stacks) {
    out += fmt::format("=== rank {} (pid {}){}\n", s.rank, s.pid,
                       s.error.empty() ? fmt::format(", by {}", s.how) : fmt::format(": not sampled ({})", s.error));
    out += s.raw;
    if (!s.raw.empty() && s.raw.back() != '\n') out += '\n';
    out += '\n';
  }
  return out;
}

}  // namespace dlaunch::launcher
