# Script mode (cmake -P), run by the build whenever IN changes: writes OUT, a
# header that holds IN's bytes as `inline constexpr std::string_view NAME` in
# namespace NAMESPACE, so that a file kept in the tree as what it is (a Python
# hook, say) is compiled into the program byte for byte. The bytes go in as an
# array rather than a raw string: no delimiter can clash with the text, and
# nothing (line endings, a backslash at a line's end) is read differently.
# OUT is rewritten only when its text changes.
#   -DIN=FILE -DOUT=FILE -DNAME=kName -DNAMESPACE=a::b
foreach(var OUT NAME NAMESPACE IN)  # IN first would read as foreach's keyword
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "EmbedText.cmake: -D${var}= is missing")
  endif()
endforeach()
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" digits)
if(digits EQUAL 0)
  message(FATAL_ERROR "${IN}: empty, nothing to embed")
endif()
# A character literal a byte ('\xc3': 0xc3 would narrow to char), sixteen a line.
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
string(REPEAT "'.x[0-9a-f][0-9a-f]'," 16 line)
string(REGEX REPLACE "(${line})" "\\1\n    " bytes "${bytes}")
string(STRIP "${bytes}" bytes)
file(RELATIVE_PATH shown ${CMAKE_CURRENT_LIST_DIR}/.. ${IN})
set(text "// Generated from ${shown} by cmake/EmbedText.cmake: do not edit.
#pragma once

#include <string_view>

namespace ${NAMESPACE} {

inline constexpr char ${NAME}Bytes[] = {
    ${bytes}
};
inline constexpr std::string_view ${NAME}(${NAME}Bytes, sizeof ${NAME}Bytes);

}  // namespace ${NAMESPACE}
")
include(${CMAKE_CURRENT_LIST_DIR}/WriteIfChanged.cmake)
dlaunch_write_if_changed(${OUT} "${text}")
