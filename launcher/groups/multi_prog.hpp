// Placeholder until the parser lands; replaced by the real part.
#pragma once
#include <string_view>
#include "base/status.hpp"
#include "envmap/programs.hpp"
namespace dlaunch::launcher {
Result<envmap::ProgramTable> ParseMultiProg(std::string_view text, std::string_view file_name, int world_size);
}
