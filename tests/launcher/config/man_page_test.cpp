#include "launcher/config/man_page.hpp"

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "envmap/worker_env.hpp"
#include "launcher/config/flag_table.hpp"
#include "launcher/config/subcommands.hpp"
#include "tests/envmap/fixtures.hpp"

namespace dlaunch::launcher {
namespace {

const std::string& Page() {
  static const std::string page = ManPage("9.8.7");
  return page;
}

bool PageHas(const std::string& text) { return Page().find(text) != std::string::npos; }

// The page's text from the line ".SH NAME" to the next ".SH".
std::string Section(const std::string& name) {
  size_t from = Page().find(".SH " + name + "\n");
  REQUIRE(from != std::string::npos);
  size_t to = Page().find("\n.SH ", from + 1);
  return Page().substr(from, to == std::string::npos ? std::string::npos : to - from);
}

TEST_CASE("roff escaping: backslashes, hyphens and a leading dot or quote", "[man]") {
  CHECK(RoffEscape("--nproc-per-node") == "\\-\\-nproc\\-per\\-node");
  CHECK(RoffEscape("C:\\dir") == "C:\\edir");
  CHECK(RoffEscape(".hidden") == "\\&.hidden");
  CHECK(RoffEscape("'quoted'") == "\\&'quoted'");
  CHECK(RoffEscape("a.b") == "a.b");
}

TEST_CASE("the man page names its version and every section", "[man]") {
  CHECK(Page().starts_with(".TH DLAUNCH 1 \"\" \"dlaunch 9.8.7\""));
  for (const char* s : {"NAME", "SYNOPSIS", "DESCRIPTION", "SUBCOMMANDS", "OPTIONS", "ENVIRONMENT", "EXIT STATUS",
                        "FILES", "EXAMPLES", "SEE ALSO"}) {
    INFO(s);
    CHECK(PageHas(std::string(".SH ") + s + "\n"));
  }
}

TEST_CASE("every request line is one the page means to use", "[man]") {
  // A '.' or '\'' at the start of generated text would be read as a request.
  const std::set<std::string> known = {".TH", ".nh", ".ad", ".SH", ".TP", ".PP", ".RS", ".RE", ".nf", ".fi", ".br"};
  std::istringstream lines(Page());
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || (line[0] != '.' && line[0] != '\'')) continue;
    INFO(line);
    CHECK(known.count(line.substr(0, line.find(' '))) == 1);
  }
}

TEST_CASE("every flag of the table is in OPTIONS, with its help, values and other spellings", "[man]") {
  std::string options = Section("OPTIONS");
  for (const Flag& f : Flags()) {
    INFO(f.name);
    CHECK(options.find("\\fB" + RoffEscape(std::string("--") + f.name) + "\\fR") != std::string::npos);
    if (f.short_name != 0) CHECK(options.find("\\fB\\-" + std::string(1, f.short_name) + "\\fR") != std::string::npos);
    CHECK(options.find(RoffEscape(f.help)) != std::string::npos);
    if (f.arity != Arity::kSwitch) CHECK(options.find("\\fI" + RoffEscape(f.doc.value) + "\\fR") != std::string::npos);
    std::istringstream choices(f.doc.choices);
    for (std::string choice; choices >> choice;) CHECK(options.find(RoffEscape(choice)) != std::string::npos);
    if (f.doc.torchrun) {
      std::string underscored = std::string("--") + f.name;
      for (char& c : underscored)
        if (c == '-' && &c > &underscored[1]) c = '_';
      CHECK(options.find("torchrun: \\fB" + RoffEscape(underscored) + "\\fR") != std::string::npos);
    }
    if (*f.doc.others != '\0') CHECK(options.find(RoffEscape(f.doc.others)) != std::string::npos);
  }
  CHECK(options.find("Values: auto, gpu, cpu.") != std::string::npos);
  CHECK(options.find("mpirun \\-np") != std::string::npos);
}

TEST_CASE("every subcommand is in the synopsis and SUBCOMMANDS, with its example", "[man]") {
  std::string synopsis = Section("SYNOPSIS"), subcommands = Section("SUBCOMMANDS");
  for (const Subcommand& s : Subcommands()) {
    INFO(s.name);
    CHECK(synopsis.find("\\fBdlaunch\\fR \\fB" + std::string(s.name) + "\\fR") != std::string::npos);
    CHECK(subcommands.find(RoffEscape(s.example)) != std::string::npos);
    CHECK(subcommands.find(RoffEscape(s.summary)) != std::string::npos);
  }
}

TEST_CASE("ENVIRONMENT names every variable a worker can be given", "[man]") {
  using envmap::EnvVars, envmap::Flavors, envmap::JobLayout;
  std::string environment = Section("ENVIRONMENT");
  JobLayout layout = ::dlaunch::envmap::testing::ThreeNodes(0);
  layout.run_id = "job42";
  layout.roles = {{"chief", 1, {}}, {"worker", 5, {}}};
  Flavors all;
  all.ompi = all.azure = all.horovod = true;
  all.azure_hostfile = "/tmp/hosts";
  all.error_file = "/tmp/error.json";
  all.progress_file = "/tmp/progress";
  EnvVars vars = envmap::WorkerEnv(layout, envmap::LocalSlots(layout).at(0), all, {});
  EnvVars per_node = envmap::PerNodeEnv(layout, all);
  vars.insert(vars.end(), per_node.begin(), per_node.end());
  REQUIRE(vars.size() > 30);
  for (const auto& [name, value] : vars) {
    INFO(name);
    CHECK(environment.find(RoffEscape(name)) != std::string::npos);
  }
}

TEST_CASE("EXIT STATUS lists dlaunch's own codes", "[man]") {
  std::string exit_status = Section("EXIT STATUS");
  std::vector<int> codes = {
      0, 1, base::kExitUsage, base::kExitNoProgress, base::kExitHang, base::kExitNotExecutable, base::kExitNotFound};
  for (const base::ExitCodeRow& row : base::kExitCodes) codes.push_back(row.code);
  for (int code : codes) {
    INFO(code);
    CHECK(exit_status.find(".TP\n\\fB" + std::to_string(code) + "\\fR\n") != std::string::npos);
  }
  // A rank's own 123 or 124 is not passed on.
  CHECK(exit_status.find("own 123 or 124 is reported as 1") != std::string::npos);
}

TEST_CASE("docs/exit-codes.md has a row for each of dlaunch's own codes", "[man][docs]") {
  std::ifstream in(std::string(DLAUNCH_SOURCE_DIR) + "/docs/exit-codes.md");
  REQUIRE(in);
  std::stringstream buf;
  buf << in.rdbuf();
  std::string page = "\n" + buf.str();
  for (const base::ExitCodeRow& row : base::kExitCodes) {
    INFO(row.code);
    CHECK(page.find(fmt::format("\n| {} |", row.code)) != std::string::npos);
  }
}

}  // namespace
}  // namespace dlaunch::launcher
