# relax_layer(NAME DIR [SOURCES files...] [LINK libs...] [PRIVATE libs...]):
# the static library of one folder of a layer: DIR/*.cc (or SOURCES),
# linking the layers below it (LINK, public) and what it uses inside
# (PRIVATE). Headers are included by their path from the source root.
function(relax_layer name dir)
  cmake_parse_arguments(L "" "" "SOURCES;LINK;PRIVATE" ${ARGN})
  if(L_SOURCES)
    set(srcs ${L_SOURCES})
  else()
    file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.cc)
  endif()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${L_LINK} PRIVATE ${L_PRIVATE})
endfunction()
