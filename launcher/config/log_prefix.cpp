#include "launcher/config/log_prefix.hpp"

#include <cctype>

#include <fmt/format.h>

#include "launcher/core/text.hpp"

namespace dlaunch::launcher {

namespace {

// string.Template's idpattern: [_a-z][_a-z0-9]*, ASCII, any case.
bool IdStart(char c) { return c == '_' || std::isalpha(static_cast<unsigned char>(c)); }
bool IdChar(char c) { return c == '_' || std::isalnum(static_cast<unsigned char>(c)); }

// The tag field for each name torch fills (local_elastic_agent.py).
const char* TagField(std::string_view name) {
  if (name == "role_name") return "{role}";
  if (name == "rank") return "{rank}";
  if (name == "local_rank") return "{local_rank}";
  return nullptr;
}

}  // namespace

Result<std::string> TagFromLogLinePrefix(std::string_view tmpl) {
  std::string out;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    char c = tmpl[i];
    if (c == '{' || c == '}') {
      out.append(2, c);  // literal in RenderTag's format
      continue;
    }
    if (c != '$') {
      out += c;
      continue;
    }
    // $$ is a dollar; $name or ${name} a field; any other $ stays as typed.
    if (i + 1 < tmpl.size() && tmpl[i + 1] == '$') {
      out += '$';
      ++i;
      continue;
    }
    bool braced = i + 1 < tmpl.size() && tmpl[i + 1] == '{';
    size_t start = i + (braced ? 2 : 1);
    size_t end = start;
    if (end < tmpl.size() && IdStart(tmpl[end]))
      while (end < tmpl.size() && IdChar(tmpl[end])) ++end;
    if (end == start || (braced && (end >= tmpl.size() || tmpl[end] != '}'))) {
      out += '$';
      continue;
    }
    std::string_view name = tmpl.substr(start, end - start);
    const char* field = TagField(name);
    if (field == nullptr)
      return Status::InvalidArgument(
          fmt::format("{}: unknown field '{}' in '{}' (torch fills ${{role_name}}, ${{rank}} and ${{local_rank}})",
                      kLogLinePrefixVar, Printable(tmpl.substr(i, end + (braced ? 1 : 0) - i)), Printable(tmpl)));
    out += field;
    i = end + (braced ? 1 : 0) - 1;
  }
  return out;
}

Result<std::optional<std::string>> TagFromEnvironment(const envmap::EnvMap& env) {
  auto it = env.find(std::string(kLogLinePrefixVar));
  if (it == env.end() || it->second.empty()) return std::optional<std::string>();
  Result<std::string> tag = TagFromLogLinePrefix(it->second);
  if (!tag.ok()) return tag.status();
  return std::optional<std::string>(std::move(*tag));
}

}  // namespace dlaunch::launcher
