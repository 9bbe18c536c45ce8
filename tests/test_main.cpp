#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  // A Watchdog left to its default second stage, this very binary, would have
  // it run as dlaunch-watch when its launcher dies: say so instead of running
  // the tests once more.
  if (argc > 0 && std::strcmp(argv[0], "dlaunch-watch") == 0) {
    std::fputs("a test program is no dlaunch-watch second stage: give the Watchdog DLAUNCH_PROGRAM\n", stderr);
    return 2;
  }
  return Catch::Session().run(argc, argv);
}
