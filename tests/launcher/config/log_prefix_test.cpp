#include "launcher/config/log_prefix.hpp"

#include <catch2/catch.hpp>

using dlaunch::launcher::TagFromLogLinePrefix;

TEST_CASE("torch's log line prefix template becomes a tag format", "[tag]") {
  struct Row {
    const char* tmpl;
    const char* want;
  };
  const Row rows[] = {
      {"[${role_name}${local_rank}]: ", "[{role}{local_rank}]: "},
      {"${rank}|", "{rank}|"},
      {"$rank:$local_rank ", "{rank}:{local_rank} "},
      {"$$${rank} {x} ", "${rank} {{x}} "},  // $$ is a dollar; braces are literal
      {"cost: $5 ${ ", "cost: $5 ${{ "},     // not a field: kept as typed, as safe_substitute
      {"${rank", "${{rank"},
      {"", ""},
  };
  for (const Row& row : rows) {
    INFO(row.tmpl);
    auto got = TagFromLogLinePrefix(row.tmpl);
    REQUIRE(got.ok());
    CHECK(*got == row.want);
  }
}

TEST_CASE("an unknown field in torch's template is one clear error", "[tag]") {
  CHECK(TagFromLogLinePrefix("[$host] ").status().message() ==
        "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE: unknown field '$host' in '[$host] ' (torch fills ${role_name}, ${rank} "
        "and ${local_rank})");
  CHECK(
      TagFromLogLinePrefix("${RANK}").status().message() ==
      "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE: unknown field '${RANK}' in '${RANK}' (torch fills ${role_name}, ${rank} "
      "and ${local_rank})");
}
