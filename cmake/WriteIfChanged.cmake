# For the build's script-mode generators (cmake -P): dlaunch_write_if_changed
# writes TEXT to FILE unless FILE holds exactly that already, so that a build
# with nothing new recompiles nothing. file(CONFIGURE) would too, but it also
# rewrites #cmakedefine and @VAR@ in the text.
function(dlaunch_write_if_changed file text)
  set(old "")
  if(EXISTS ${file})
    file(READ ${file} old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE ${file} "${text}")
  endif()
endfunction()
