// The bounded YAML loader behind job specs and --set: an alias bomb, a cycle,
// deep nesting and a huge text are refused in one line, fast.
#include "launcher/config/yaml_load.hpp"

#include <chrono>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

namespace dlaunch::launcher {
namespace {

// `levels` anchors, each a sequence of 9 aliases of the one before: 9^levels
// leaves in a few hundred bytes ("billion laughs").
std::string AliasBomb(int levels) {
  std::string out = "{a0: &a0 [x, x, x, x, x, x, x, x, x]";
  for (int i = 1; i < levels; ++i) {
    out += fmt::format(", a{}: &a{} [", i, i);
    for (int j = 0; j < 9; ++j) out += fmt::format("{}*a{}", j ? ", " : "", i - 1);
    out += "]";
  }
  return out + "}";
}

std::string YamlError(const std::string& text, bool lines = true) {
  Result<YAML::Node> r = LoadYaml(text, "spec.yml", lines);
  REQUIRE_FALSE(r.ok());
  return r.status().message();
}

}  // namespace

TEST_CASE("LoadYaml refuses an alias bomb at once, counting every alias", "[yaml][bounds]") {
  std::string bomb = AliasBomb(9);
  CHECK(bomb.size() < 600);
  auto start = std::chrono::steady_clock::now();
  CHECK(YamlError(bomb) == "spec.yml: expands to more than 100000 YAML nodes (aliases count each time they are used)");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  // Small enough bombs are ordinary documents: 9^4 leaves.
  CHECK(LoadYaml(AliasBomb(4), "spec.yml", true).ok());
}

TEST_CASE("LoadYaml counts to the node limit exactly", "[yaml][bounds]") {
  // `total` nodes: a sequence (1) of n uses of one anchored 100-node sequence
  // (a sequence of 99 scalars), then r more scalars: 1 + 100 n + r.
  auto nodes = [](size_t total) {
    size_t n = (total - 1) / 100, r = (total - 1) % 100;
    std::string out = "[&s [x";
    for (int i = 1; i < 99; ++i) out += ", x";
    out += "]";
    for (size_t i = 1; i < n; ++i) out += ", *s";
    for (size_t i = 0; i < r; ++i) out += ", y";
    return out + "]";
  };
  CHECK(LoadYaml(nodes(kMaxYamlNodes), "v", false).ok());
  CHECK(YamlError(nodes(kMaxYamlNodes + 1)) ==
        "spec.yml: expands to more than 100000 YAML nodes (aliases count each time they are used)");
}

TEST_CASE("LoadYaml refuses a cycle and deep nesting without recursing", "[yaml][bounds]") {
  // yaml-cpp registers an anchor before its contents: the alias is the node itself.
  CHECK(YamlError("&a [*a]") == "spec.yml: nested deeper than 64 levels");
  CHECK(YamlError("&a {k: *a}") == "spec.yml: nested deeper than 64 levels");
  CHECK(YamlError(std::string(65, '[') + std::string(65, ']')) == "spec.yml: nested deeper than 64 levels");
  CHECK(LoadYaml(std::string(64, '[') + std::string(64, ']'), "v", false).ok());
  // Far deeper: yaml-cpp's own guard stops the parse first, with the same line.
  CHECK(YamlError(std::string(20000, '[') + std::string(20000, ']'), false) ==
        "spec.yml: nested deeper than 64 levels");
}

TEST_CASE("LoadYaml refuses a text over the byte limit before parsing it", "[yaml][bounds]") {
  std::string big = "x: '" + std::string(kMaxYamlBytes, 'a') + "'";
  CHECK(YamlError(big) == fmt::format("spec.yml: {} bytes, over the limit of 262144", big.size()));
}

TEST_CASE("LoadYaml names the line of a parse error when asked", "[yaml]") {
  CHECK(YamlError("a: 1\nb: [x\n").starts_with("spec.yml:3: "));
  CHECK(YamlError("a: 1\nb: [x\n", false).starts_with("spec.yml: "));
  Result<YAML::Node> ok = LoadYaml("a: &x 1\nb: *x\n", "spec.yml", true);
  REQUIRE(ok.ok());
  CHECK((*ok)["b"].as<int>() == 1);
}

}  // namespace dlaunch::launcher
