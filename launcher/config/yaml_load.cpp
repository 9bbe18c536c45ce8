#include "launcher/config/yaml_load.hpp"

#include <utility>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>

namespace dlaunch::launcher {

// A walk with its own stack, not recursion: a cycle or a deep document ends
// at the limits, never in a stack overflow.
Status CheckYamlExpansion(const YAML::Node& root, const std::string& subject) {
  std::vector<std::pair<YAML::Node, int>> todo;
  todo.emplace_back(root, 0);
  size_t visited = 0;
  while (!todo.empty()) {
    auto [node, depth] = std::move(todo.back());
    todo.pop_back();
    if (++visited > kMaxYamlNodes)
      return Status::InvalidArgument(fmt::format(
          "{}: expands to more than {} YAML nodes (aliases count each time they are used)", subject, kMaxYamlNodes));
    if (!node.IsMap() && !node.IsSequence()) continue;
    if (depth >= kMaxYamlDepth)
      return Status::InvalidArgument(fmt::format("{}: nested deeper than {} levels", subject, kMaxYamlDepth));
    if (node.IsMap()) {
      for (const auto& kv : node) {
        todo.emplace_back(kv.first, depth + 1);
        todo.emplace_back(kv.second, depth + 1);
      }
    } else {
      for (const YAML::Node& item : node) todo.emplace_back(item, depth + 1);
    }
  }
  return Status::Ok();
}

Result<YAML::Node> LoadYaml(std::string_view text, const std::string& subject, bool line_numbers) {
  if (text.size() > kMaxYamlBytes)
    return Status::InvalidArgument(
        fmt::format("{}: {} bytes, over the limit of {}", subject, text.size(), kMaxYamlBytes));
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::DeepRecursion&) {
    // yaml-cpp's own guard (2,000 levels) says only "bad file".
    return Status::InvalidArgument(fmt::format("{}: nested deeper than {} levels", subject, kMaxYamlDepth));
  } catch (const YAML::ParserException& e) {
    if (line_numbers) return Status::InvalidArgument(fmt::format("{}:{}: {}", subject, e.mark.line + 1, e.msg));
    return Status::InvalidArgument(fmt::format("{}: {}", subject, e.msg));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}: {}", subject, e.msg));
  }
  if (Status s = CheckYamlExpansion(root, subject); !s.ok()) return s;
  return root;
}

}  // namespace dlaunch::launcher
