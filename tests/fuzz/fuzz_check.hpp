// FUZZ_CHECK(cond, what): a property a fuzz target asserts. On failure it prints
// what broke and aborts, which libFuzzer records as a crash with the input saved.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_CHECK(cond, what)                                                                                 \
  do {                                                                                                         \
    if (!(cond)) {                                                                                             \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, std::string(what).c_str()); \
      std::abort();                                                                                            \
    }                                                                                                          \
  } while (0)
