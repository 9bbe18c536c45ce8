# Warning flags shared by every dlaunch target.
function(dlaunch_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
endfunction()

# A library made of every .cpp in its folder, with the project root on the include path
# so that includes read "envmap/torch_env.hpp".
function(dlaunch_library name)
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  list(FILTER srcs EXCLUDE REGEX ".*/main\\.cpp$")
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  dlaunch_warnings(${name})
endfunction()
