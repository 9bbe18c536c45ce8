// A fresh directory for one unit test (mkdtemp under $TMPDIR, or /tmp), removed
// with everything in it when the test ends. Shared by the unit tests that touch
// files, so that each does not grow its own; and ReadFile, which they share.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

#include <catch2/catch.hpp>

namespace dlaunch::testing {

class TempDir {
 public:
  // `tag` names the test in the directory's name (dlaunch-TAG-XXXXXX), for
  // whoever finds one left behind by a crashed test.
  explicit TempDir(std::string_view tag = "test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / ("dlaunch-" + std::string(tag) + "-XXXXXX")).string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string operator/(std::string_view name) const { return path + "/" + std::string(name); }

  std::string path;
};

// The whole file, or "" when it cannot be read.
inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace dlaunch::testing
