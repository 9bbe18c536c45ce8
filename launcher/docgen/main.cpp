// dlaunch-docgen: writes what the build makes from the flag table, the manual
// page and the bash completion (launcher/config/man_page.hpp, completion.hpp).
// Run by CMake (cmake/Packaging.cmake), never installed.
//
//   dlaunch-docgen man VERSION OUT
//   dlaunch-docgen completion OUT
//   dlaunch-docgen metrics OUT     docs/monitoring.md's metric list (launcher/metrics/prometheus.hpp)
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "launcher/config/completion.hpp"
#include "launcher/config/man_page.hpp"
#include "launcher/metrics/prometheus.hpp"

int main(int argc, char** argv) {
  std::string what = argc > 1 ? argv[1] : "";
  std::string text;
  const char* out = nullptr;
  if (what == "man" && argc == 4) {
    text = dlaunch::launcher::ManPage(argv[2]);
    out = argv[3];
  } else if (what == "completion" && argc == 3) {
    text = dlaunch::launcher::BashCompletion();
    out = argv[2];
  } else if (what == "metrics" && argc == 3) {
    text = dlaunch::launcher::MetricsMarkdown();
    out = argv[2];
  } else {
    std::fputs("usage: dlaunch-docgen man VERSION OUT | completion OUT | metrics OUT\n", stderr);
    return 2;
  }
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) {
    std::fprintf(stderr, "dlaunch-docgen: %s: cannot write (%s)\n", out, std::strerror(errno));
    return 1;
  }
  return 0;
}
