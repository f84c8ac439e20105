# relax_layer(NAME DIR [SOURCES files...] [LINK libs...] [PRIVATE libs...]):
# the static library of one folder of a layer: DIR/*.cc (or SOURCES),
# linking the layers below it (LINK, public) and what it uses inside
# (PRIVATE). Headers are included by their path from the source root
# ("ir/expr.h"), but a library sees only the headers of its own folders
# and of the layers it links: each exports its own folders' headers alone
# (relax_header_tree), so an include that runs up the order or across
# siblings fails to compile, header-only code included.
function(relax_layer name dir)
  cmake_parse_arguments(L "" "" "SOURCES;LINK;PRIVATE" ${ARGN})
  if(L_SOURCES)
    set(srcs ${L_SOURCES})
  else()
    file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.cc)
  endif()
  add_library(${name} STATIC ${srcs})
  set(dirs ${dir})
  foreach(src ${srcs})
    get_filename_component(d ${src} DIRECTORY)
    file(RELATIVE_PATH d ${CMAKE_SOURCE_DIR} ${d})
    list(APPEND dirs ${d})
  endforeach()
  list(REMOVE_DUPLICATES dirs)
  relax_header_tree(${name} PUBLIC ${dirs})
  target_link_libraries(${name} PUBLIC ${L_LINK} PRIVATE ${L_PRIVATE})
endfunction()

# relax_header_tree(TARGET PUBLIC|PRIVATE DIRS...): TARGET's include folder
# is a tree of links to the headers of DIRS alone (each folder's own *.h,
# not its subfolders'), at their paths from the source root, made anew at
# every configure (a header added or removed re-runs it).
function(relax_header_tree name scope)
  set(tree ${CMAKE_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${tree})
  foreach(d ${ARGN})
    file(GLOB hdrs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${d}/*.h)
    foreach(h ${hdrs})
      file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${h})
      get_filename_component(parent ${tree}/${rel} DIRECTORY)
      file(MAKE_DIRECTORY ${parent})
      file(CREATE_LINK ${h} ${tree}/${rel} SYMBOLIC)
    endforeach()
  endforeach()
  file(MAKE_DIRECTORY ${tree})
  target_include_directories(${name} ${scope} ${tree})
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
