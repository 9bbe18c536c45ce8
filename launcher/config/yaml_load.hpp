// The one way dlaunch reads YAML (a job spec, each `--set` value), with bounds
// on what the text may stand for. yaml-cpp shares an anchored node among all
// its aliases, so about 500 bytes of nested anchors stand for billions of
// nodes, and anything that walks the tree visits each of them. An alias may
// even name the node it sits in (`&a [*a]`), a cycle. The loader walks the
// document the way its readers will, counting every node each time an alias
// brings it in, and refuses it once the count or the nesting passes a limit, so
// the refusal itself costs at most kMaxYamlNodes steps.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "base/status.hpp"

namespace dlaunch::launcher {

// The most bytes of YAML read: a job spec is a page. yaml-cpp takes about
// 280 bytes and 1.5 us per node: 1 MiB of `[1,1,...]` took 1.5 s and 280 MB on
// a loaded machine, 256 KiB stays well under a second and 100 MB.
inline constexpr size_t kMaxYamlBytes = size_t{256} << 10;
// The most nodes a document may expand to, keys and values, each alias counted
// where it is used.
inline constexpr size_t kMaxYamlNodes = 100000;
// The deepest nesting of mappings and sequences (a job spec needs 5).
inline constexpr int kMaxYamlDepth = 64;

// Parses `text` as one YAML document. `subject` names it in every error
// ("job spec /jobs/job.yml", "--set a.b=..."). Fails with InvalidArgument:
//   "SUBJECT: 2000000 bytes, over the limit of 262144"
//   "SUBJECT:LINE: MESSAGE"   yaml-cpp's parse error (with `line_numbers`; else "SUBJECT: MESSAGE")
//   "SUBJECT: expands to more than 100000 YAML nodes (aliases count each time they are used)"
//   "SUBJECT: nested deeper than 64 levels"
Result<YAML::Node> LoadYaml(std::string_view text, const std::string& subject, bool line_numbers);

// The expansion and depth checks of LoadYaml alone, for a document put together
// from several loaded parts (a spec and its --set values); same messages.
Status CheckYamlExpansion(const YAML::Node& root, const std::string& subject);

}  // namespace dlaunch::launcher
