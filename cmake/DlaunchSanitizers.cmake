# Sanitizer and fuzzer builds. Each goes into its own build directory:
#
#   cmake -S . -B build-asan -DDLAUNCH_SANITIZE=ON            (gcc or clang)
#   cmake -S . -B build-fuzz -DDLAUNCH_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++
#
# DLAUNCH_SANITIZE builds everything with AddressSanitizer and UBSan; UBSan aborts
# on its first finding (-fno-sanitize-recover=all), so a finding fails the test
# that hit it instead of scrolling past. DLAUNCH_FUZZ adds the libFuzzer targets
# of tests/fuzz and implies the sanitizers. Both link Boost and OpenSSL
# dynamically: the static archives buy start-up time, which does not matter
# here, and dynamic linking keeps clang's runtime away from gcc-built archives.
option(DLAUNCH_SANITIZE "Build with -fsanitize=address,undefined" OFF)
option(DLAUNCH_FUZZ "Build the libFuzzer targets in tests/fuzz (clang only)" OFF)

if(DLAUNCH_FUZZ AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "DLAUNCH_FUZZ needs clang (-DCMAKE_CXX_COMPILER=clang++), not ${CMAKE_CXX_COMPILER_ID}")
endif()

if(DLAUNCH_SANITIZE OR DLAUNCH_FUZZ)
  # The build type Sanitize, which scripts/test.sh and scripts/fuzz.sh use: -O1,
  # as the sanitizers' authors advise, with assertions on and line tables only
  # (-g1: a report's stack needs file:line, not variables). Under the sanitizers
  # -O2 -g compiles 2.7 times as long as a release build, -O1 -g1 half that.
  set(CMAKE_CXX_FLAGS_SANITIZE "-O1 -g1")
  # Not UBSan's vptr check: with Boost linked dynamically it reports
  # Boost.System's error_category, whose type information each shared object
  # carries its own copy of, as the wrong dynamic type (seen when accept() fails
  # with EMFILE); a suppression does not reach it with gcc's runtime.
  add_compile_options(-fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  set(Boost_USE_STATIC_LIBS OFF)
  set(OPENSSL_USE_STATIC_LIBS FALSE)
endif()
if(DLAUNCH_FUZZ)
  # Coverage for libFuzzer in every library; only the targets link its main().
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

# Called once every target exists: the sanitizer build's dlaunch-mpi-bootstrap
# unwinds slowly, so that Open MPI's leaks match tests/sanitizers/lsan.supp.
function(dlaunch_sanitizer_extras)
  if(DLAUNCH_SANITIZE AND TARGET dlaunch-mpi-bootstrap)
    target_sources(dlaunch-mpi-bootstrap PRIVATE ${PROJECT_SOURCE_DIR}/tests/sanitizers/mpi_bootstrap_options.cpp)
  endif()
endfunction()
