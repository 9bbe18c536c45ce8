// dlaunch-watch GROUP MARK DIR FILE: the watchdog that dlaunch starts for each
// job (launcher/watchdog/watch.hpp), with its orders on stdin. Not for people:
// dlaunch starts it and writes its orders. Linked statically and with nothing
// but /proc reading, so that its start costs a fraction of a fork of dlaunch.
#include <cstdio>
#include <string>
#include <vector>

#include "launcher/watchdog/watch.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  dlaunch::Result<dlaunch::launcher::WatchOrders> orders = dlaunch::launcher::ParseWatchArgs(args);
  if (!orders.ok()) {
    std::fprintf(stderr, "%s\n", orders.status().message().c_str());
    return 2;
  }
  dlaunch::launcher::RunWatch(0, *orders);
}
