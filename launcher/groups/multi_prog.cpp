#include "launcher/groups/multi_prog.hpp"
namespace dlaunch::launcher {
Result<envmap::ProgramTable> ParseMultiProg(std::string_view, std::string_view, int) {
  return Status::InvalidArgument("--multi-prog: not yet");
}
}
