# The layers of cmake/layers.txt, read once at configure time.
#
# After include(Layers):
#   DLAUNCH_LAYERS                 the folders, bottom first (base envmap ... launcher/modes)
#   DLAUNCH_LAYER_MAY_<folder>     the folders that folder may include (and its library links)
#   dlaunch_layer_library(FOLDER OUT)  sets OUT to the folder's library: dlaunch_<last part>
#   dlaunch_link_layers()          links each layer's library to the libraries its line names
#
# tests/layering/check.sh reads the same file for the includes.
set(DLAUNCH_LAYER_TABLE ${CMAKE_CURRENT_LIST_DIR}/layers.txt)
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${DLAUNCH_LAYER_TABLE})

function(dlaunch_layer_library folder out)
  get_filename_component(last ${folder} NAME)
  set(${out} dlaunch_${last} PARENT_SCOPE)
endfunction()

set(DLAUNCH_LAYERS)
file(STRINGS ${DLAUNCH_LAYER_TABLE} dlaunch_layer_lines REGEX "^[^#]")
foreach(line ${dlaunch_layer_lines})
  if(NOT line MATCHES "^([a-z_/]+):(.*)$")
    message(FATAL_ERROR "${DLAUNCH_LAYER_TABLE}: expected 'folder: folders it may include', got '${line}'")
  endif()
  set(folder ${CMAKE_MATCH_1})
  separate_arguments(may UNIX_COMMAND "${CMAKE_MATCH_2}")
  foreach(below ${may})
    if(NOT below IN_LIST DLAUNCH_LAYERS)
      message(FATAL_ERROR "${DLAUNCH_LAYER_TABLE}: ${folder} may include ${below}, which is not a layer "
                          "above it in the file (a layer lists only those before it)")
    endif()
  endforeach()
  list(APPEND DLAUNCH_LAYERS ${folder})
  set(DLAUNCH_LAYER_MAY_${folder} ${may})
endforeach()

function(dlaunch_link_layers)
  foreach(folder ${DLAUNCH_LAYERS})
    dlaunch_layer_library(${folder} lib)
    if(NOT TARGET ${lib})
      message(FATAL_ERROR "${DLAUNCH_LAYER_TABLE}: ${folder} has no library ${lib} (dlaunch_library in ${folder}/)")
    endif()
    set(libs)
    foreach(below ${DLAUNCH_LAYER_MAY_${folder}})
      dlaunch_layer_library(${below} below_lib)
      list(APPEND libs ${below_lib})
    endforeach()
    if(libs)
      target_link_libraries(${lib} PUBLIC ${libs})
    endif()
  endforeach()
endfunction()
