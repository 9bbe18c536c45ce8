# The functions dlaunch's start runs, together at the front of its text.
#
# A start touched 48 of the 62 64 KiB windows of dlaunch's 3.9 MB of text, and
# each touch is a page fault that maps 16 pages around it (the kernel's fault-
# around). A one-node job and both ends of a rendezvous run about 875 KB of
# code between them. GNU ld cannot order functions
# by name, so dlaunch links with lld where it is installed (Debian's `lld`),
# with cmake/dlaunch.symbol-order (scripts/symbol-order.sh writes it): a
# one-worker job then takes 31 fewer page faults and about 7 % less task-clock
# (bench/profile/agent.md). Without lld the program is the same, only slower to
# start; the build says so once. The hardening is the same either way: lld takes
# the same relro, now, PIE and build-id, and DT_RELR through its own flag.
include(CheckLinkerFlag)
check_linker_flag(CXX "-fuse-ld=lld" DLAUNCH_HAVE_LLD)
set(DLAUNCH_SYMBOL_ORDER ${CMAKE_CURRENT_LIST_DIR}/dlaunch.symbol-order)
if(NOT DLAUNCH_HAVE_LLD)
  message(STATUS "lld not found: dlaunch links with the default linker, its start path not ordered (apt-get install lld)")
endif()

# Links `target` with lld and its start path first. The sanitizer and fuzz
# builds keep the default linker: their timings mean nothing anyway.
function(dlaunch_order_text target)
  if(NOT DLAUNCH_HAVE_LLD OR DLAUNCH_SANITIZE OR DLAUNCH_FUZZ)
    return()
  endif()
  # Read by cmake/DlaunchHardening.cmake's link options: lld 14 spells DT_RELR
  # --pack-dyn-relocs=relr and only warns at -z pack-relative-relocs.
  set_property(TARGET ${target} PROPERTY DLAUNCH_LLD ON)
  target_link_options(${target} PRIVATE -fuse-ld=lld "LINKER:--symbol-ordering-file=${DLAUNCH_SYMBOL_ORDER}"
                      "LINKER:--no-warn-symbol-ordering" "LINKER:--build-id=sha1")
  if(DLAUNCH_HAVE_RELR)
    target_link_options(${target} PRIVATE "LINKER:--pack-dyn-relocs=relr")
  endif()
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${DLAUNCH_SYMBOL_ORDER})
endfunction()
