#include "launcher/core/exit.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include "launcher/core/output.hpp"

namespace dlaunch::launcher {

int Fail(int code, std::string_view message, std::string_view who) {
  WriteAll(STDERR_FILENO, fmt::format("{}: {}\n", who, message));
  return code;
}

}  // namespace dlaunch::launcher
