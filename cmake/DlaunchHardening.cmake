# The hardening every Debian package is built with (dpkg-buildflags with
# DEB_BUILD_MAINT_OPTIONS=hardening=+all), for every program of the default
# build: position-independent code (ASLR for the program's own code), the
# stack protector and stack-clash probes, FORTIFY's checked string and memory
# functions, Intel CET's branch protection, and full RELRO with BIND_NOW (the GOT is read-only once
# the loader is done). dlaunch runs as root on shared nodes, listens on TCP and
# parses what peers send: it carries every defence a packaged daemon does.
# tests/integration/test_hardening.sh holds the built and the packaged
# programs to these flags, and to what dpkg-buildflags says where it exists.
#
# The sanitizer and fuzz builds leave FORTIFY out (it hides accesses from
# ASan) and keep the rest.
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
include(CheckPIESupported)
check_pie_supported(LANGUAGES CXX)  # so that executables link with -pie, not only compile with -fPIE

add_compile_options(-fstack-protector-strong -fstack-clash-protection -fcf-protection=full -Wformat
                    -Werror=format-security)
if(NOT DLAUNCH_SANITIZE AND NOT DLAUNCH_FUZZ)
  # FORTIFY needs the optimiser; glibc warns and does nothing at -O0.
  add_compile_definitions($<$<NOT:$<CONFIG:Debug>>:_FORTIFY_SOURCE=2>)
endif()
add_link_options(-Wl,-z,relro -Wl,-z,now)
# DT_RELR (binutils 2.38, glibc 2.36): the PIE's 6,080 relative relocations,
# most of them the static libcrypto's tables, packed into a 1 KiB bitmap
# instead of 146 KiB of entries the loader reads at every start (a one-worker
# job: 2.33-2.61 ms of task-clock either way here, within noise; bench/profile/
# startup.md). It needs glibc 2.36 at run time, which the default build needs
# anyway (manylinux_2_36, scripts/package.sh).
include(CheckLinkerFlag)
check_linker_flag(CXX -Wl,-z,pack-relative-relocs DLAUNCH_HAVE_RELR)
if(DLAUNCH_HAVE_RELR)
  # A target linked by lld (cmake/DlaunchTextOrder.cmake) says it in lld's words.
  add_link_options("$<$<NOT:$<BOOL:$<TARGET_PROPERTY:DLAUNCH_LLD>>>:-Wl,-z,pack-relative-relocs>")
endif()

# Links `target` as a static-pie: no loader and no library mapped at its start,
# its code still randomised. CMake's own PIE link adds -pie after the target's
# options, which would make it dynamic again, so the target leaves
# POSITION_INDEPENDENT_CODE unset and says -fPIE and -static-pie itself.
function(dlaunch_static_pie target)
  set_property(TARGET ${target} PROPERTY POSITION_INDEPENDENT_CODE)
  target_compile_options(${target} PRIVATE -fPIE)
  target_link_options(${target} PRIVATE -static-pie)
endfunction()
