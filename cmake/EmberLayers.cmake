# The layers of DESIGN.md as build targets. Each layer is an OBJECT library compiled against a
# view of the source tree that holds only its own folder and the folders it may depend on (a
# directory of symbolic links in the build tree), so `#include "runtime/..."` from lib/model does
# not compile: a dependency the wrong way is a build error, not a convention. The shipped library
# `ember` is the union of the layers' objects.
#
# ember_add_layer(NAME SOURCES a.cpp ... SEES layer ... [LIBRARIES target ...])
#   NAME       the layer, also the name of its folder in includes ("model" -> "model/x.hpp")
#   SEES       the layers whose headers it may include (its own always)
#   LIBRARIES  third-party targets whose headers it uses

# Where each layer's headers live, as they are included.
set(EMBER_LAYER_DIRS
  util=${PROJECT_SOURCE_DIR}/lib/util
  kernels=${PROJECT_SOURCE_DIR}/kernels
  model=${PROJECT_SOURCE_DIR}/lib/model
  tokenizer=${PROJECT_SOURCE_DIR}/lib/tokenizer
  grammar=${PROJECT_SOURCE_DIR}/lib/grammar
  backend=${PROJECT_SOURCE_DIR}/lib/backend
  runtime=${PROJECT_SOURCE_DIR}/lib/runtime
  capi=${PROJECT_SOURCE_DIR}/lib/capi)

function(_ember_layer_dir layer out)
  foreach(entry IN LISTS EMBER_LAYER_DIRS)
    if(entry MATCHES "^${layer}=(.*)$")
      set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  message(FATAL_ERROR "ember: no layer named '${layer}'")
endfunction()

function(ember_add_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;SEES;LIBRARIES" ${ARGN})
  set(target ember_layer_${name})
  add_library(${target} OBJECT ${L_SOURCES})

  # The view: <build>/layers/<name>/<layer> -> that layer's folder, for itself and what it sees.
  set(view ${PROJECT_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${view})
  file(MAKE_DIRECTORY ${view})
  foreach(layer IN LISTS L_SEES ITEMS ${name})
    _ember_layer_dir(${layer} dir)
    file(CREATE_LINK ${dir} ${view}/${layer} SYMBOLIC)
  endforeach()

  target_include_directories(${target} PRIVATE ${view} ${PROJECT_SOURCE_DIR}/include)
  target_compile_features(${target} PRIVATE cxx_std_20)
  set_target_properties(${target} PROPERTIES
    CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON
    UNITY_BUILD ${EMBER_UNITY_BUILD} UNITY_BUILD_BATCH_SIZE 8)
  target_compile_definitions(${target} PRIVATE EMBER_VERSION_STRING="${PROJECT_VERSION}"
                                               $<$<BOOL:${BUILD_SHARED_LIBS}>:EMBER_BUILDING_SHARED>
                                               $<$<BOOL:${EMBER_WITH_ONEDNN}>:EMBER_WITH_ONEDNN>)
  if(EMBER_CUDA)
    set_target_properties(${target} PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
                                               CUDA_VISIBILITY_PRESET hidden)
    target_compile_definitions(${target} PRIVATE EMBER_HAVE_CUDA)
  endif()
  # An OBJECT library takes only the usage requirements (headers, flags); `ember` links them.
  target_link_libraries(${target} PRIVATE ${L_LIBRARIES})
  ember_target_warnings(${target})
  target_sources(ember PRIVATE $<TARGET_OBJECTS:${target}>)
endfunction()
