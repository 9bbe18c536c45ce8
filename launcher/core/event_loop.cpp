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

void RunWhile(boost::asio::io_context& io, const std::function<bool()>& more) {
  io.restart();
  while (more() && io.run_one() > 0) {
  }
}

void RunReady(boost::asio::io_context& io) {
  io.restart();
  io.poll();
}

}  // namespace dlaunch::launcher
