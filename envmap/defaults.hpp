// Moved to base/defaults.hpp (namespace dlaunch::base); this forwarding header,
// and envmap::kName for base::kName, go once no file names them.
#pragma once
#include "base/defaults.hpp"

namespace dlaunch::envmap {
using namespace dlaunch::base;  // NOLINT: a shim for the move
}  // namespace dlaunch::envmap
