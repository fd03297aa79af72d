# The header-only dependencies of a cross build (Windows through MinGW, arm64), taken from the
# build machine's Debian packages: fmt (header-only mode), Eigen, doctest and nlohmann-json.
# Their headers live in /usr/include beside the build machine's C library, which a cross
# compiler must never see, so each gets a folder of its own here that links to just its
# headers, and an imported target of the name find_package would give.
set(_ember_cross_include ${PROJECT_BINARY_DIR}/cross-include)
file(MAKE_DIRECTORY ${_ember_cross_include})
foreach(entry fmt=/usr/include/fmt eigen3=/usr/include/eigen3 doctest=/usr/include/doctest
              nlohmann=/usr/include/nlohmann)
  string(REPLACE "=" ";" pair ${entry})
  list(GET pair 0 name)
  list(GET pair 1 source)
  if(NOT EXISTS ${source})
    message(FATAL_ERROR "ember cross build: ${source} is missing (scripts/install-deps.sh installs it)")
  endif()
  if(NOT EXISTS ${_ember_cross_include}/${name})
    file(CREATE_LINK ${source} ${_ember_cross_include}/${name} SYMBOLIC)
  endif()
endforeach()

add_library(fmt::fmt INTERFACE IMPORTED)
set_target_properties(fmt::fmt PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${_ember_cross_include}
                                          INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)
add_library(Eigen3::Eigen INTERFACE IMPORTED)
set_target_properties(Eigen3::Eigen PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${_ember_cross_include}/eigen3)
add_library(doctest::doctest INTERFACE IMPORTED)
set_target_properties(doctest::doctest PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${_ember_cross_include})
add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${_ember_cross_include})
set(fmt_FOUND TRUE)
set(Eigen3_FOUND TRUE)
set(doctest_FOUND TRUE)
set(nlohmann_json_FOUND TRUE)
