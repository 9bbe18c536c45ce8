// Moved to base/status.hpp; this forwarding header goes once no file names it.
#pragma once
#include "base/status.hpp"
