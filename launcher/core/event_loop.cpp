#include "launcher/core/event_loop.hpp"

#include <unistd.h>

#include "launcher/core/output.hpp"

namespace dlaunch::launcher {

int EventLoop::Run() {
  io_.run();
  if (code_) return *code_;
  WriteAll(STDERR_FILENO, "dlaunch: internal error: the event loop ran out of work before the job ended\n");
  return 1;
}

}  // namespace dlaunch::launcher
