#include "launcher/config/subcommands.hpp"

#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/config/cli.hpp"
#include "launcher/config/coordinator_options.hpp"
#include "launcher/config/job_plan.hpp"
#include "launcher/config/live_options.hpp"

namespace dlaunch::launcher {
namespace {

std::vector<std::string> Words(const char* text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w.substr(0, w.find('=')));
  return out;
}

TEST_CASE("--help starts with the subcommands, one line each, before the flags", "[subcommands]") {
  std::string help = UsageText();
  REQUIRE(help.starts_with("usage: dlaunch [flags] -- COMMAND [ARGS...]\n"));
  size_t listed = help.find("\nSubcommands:\n");
  size_t first_flag = help.find("--nproc-per-node N ");
  REQUIRE(listed != std::string::npos);
  REQUIRE(first_flag != std::string::npos);
  CHECK(listed < first_flag);
  for (const Subcommand& s : Subcommands()) {
    INFO(s.name);
    size_t at = help.find(std::string("\n  ") + s.name + " ");
    REQUIRE(at != std::string::npos);
    CHECK(at < first_flag);
    CHECK(help.find(s.summary, at) == help.find('\n', at + 1) - std::string(s.summary).size());
  }
}

TEST_CASE("each subcommand's help ends with its one example", "[subcommands]") {
  std::vector<std::pair<std::string, std::string>> helps = {{"job", JobUsage()},
                                                            {"status", LiveUsage("status")},
                                                            {"stacks", LiveUsage("stacks")},
                                                            {"coordinator", DaemonUsage()}};
  REQUIRE(helps.size() == Subcommands().size());
  for (const auto& [name, help] : helps) {
    INFO(name);
    REQUIRE(FindSubcommand(name) != nullptr);
    std::string last = std::string("\nexample: ") + FindSubcommand(name)->example + "\n";
    CHECK(help.ends_with(last));
    CHECK(help.find("example:") == help.size() - last.size() + 1);  // one example
    CHECK(std::string(FindSubcommand(name)->example).starts_with("dlaunch " + name + " "));
  }
  CHECK(FindSubcommand("bogus") == nullptr);
  CHECK(ExampleLine("bogus").empty());
}

TEST_CASE("the options the completion offers for status and stacks are the ones they take", "[subcommands]") {
  for (const char* name : {"status", "stacks"}) {
    for (const std::string& option : Words(FindSubcommand(name)->options)) {
      INFO(name << " " << option);
      std::vector<std::string> args = {option};
      if (option == "--dir") args.push_back("/tmp");
      auto plan = DecideLive(name, args);
      INFO(plan.status().message());
      CHECK(plan.ok());
    }
  }
}

TEST_CASE("the options the completion offers for coordinator are coordinator flags", "[subcommands]") {
  for (const std::string& option : Words(FindSubcommand("coordinator")->options)) {
    INFO(option);
    auto plan = DecideDaemon({option, "x"}, {});
    if (!plan.ok()) CHECK(plan.status().message().find("is not a coordinator flag") == std::string::npos);
  }
}

}  // namespace
}  // namespace dlaunch::launcher
