// dlaunch-watch GROUP DIR FILE: the watchdog that dlaunch starts for each job
// (launcher/watchdog/watch.hpp). Not for people: dlaunch starts it with the job
// mark and then its orders on stdin, and its stdout and stderr on a pipe of
// its own, where WatchAnswer (kWatchAck and the challenge it read) says that it is watching and anything else (this
// program's complaints, or a foreign program's output) that it is not. Linked
// statically and with nothing but /proc reading, so that its start costs a
// fraction of a fork of dlaunch.
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
  dlaunch::Result<dlaunch::launcher::WatchRecord> record = dlaunch::launcher::ReadWatchMark(0);
  if (!record.ok()) {
    std::fprintf(stderr, "%s\n", record.status().message().c_str());
    return 2;
  }
  orders->mark_entry = record->mark_entry;
  dlaunch::launcher::RunWatch(0, *orders, 1, record->challenge);
}
