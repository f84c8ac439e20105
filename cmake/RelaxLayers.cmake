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

# relax_uses_llvm(NAME): a layer whose sources include LLVM's headers. Every
# definition it makes is hidden from the dynamic symbol table. Adding a pass
# to a pass manager instantiates LLVM's templates in our objects (the vtable
# of PassModel<Function, SROAPass>, ...); exported from an executable, such a
# symbol interposes on the one inside any other LLVM in the process, and
# Mesa's lavapipe loads LLVM 15 into every Vulkan program: its shader
# compiler then ran LLVM 16's SROA on LLVM 15's IR and crashed
# (tests/tools/test_llvm_exports.py checks the binaries export none).
function(relax_uses_llvm name)
  target_include_directories(${name} PRIVATE ${LLVM_INCLUDE_DIRS} ${ARGN})
  target_compile_definitions(${name} PRIVATE ${LLVM_DEFINITIONS})
  set_target_properties(${name} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endfunction()
