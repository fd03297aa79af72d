# Script run by the install_consumer test (cmake -P).
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()

run(${CMAKE_COMMAND} --install ${EMBER_BINARY_DIR} --prefix ${prefix})

# Only the public headers, the library and the package files are installed.
file(GLOB_RECURSE installed RELATIVE ${prefix} ${prefix}/*)
foreach(f IN LISTS installed)
  if(NOT f MATCHES "^include/ember/[^/]+\\.h(pp)?$" AND
     NOT f MATCHES "^lib[^/]*/libember[^/]*$" AND
     NOT f MATCHES "^lib[^/]*/cmake/ember/ember[A-Za-z-]*\\.cmake$")
    message(FATAL_ERROR "unexpected installed file: ${f}")
  endif()
endforeach()

run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build -G ${CMAKE_GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
    # The compiler ember was built with: a static libember needs its OpenMP runtime (libgomp for
    # GCC, libomp for Clang, whose ASan build is CI's).
    -DCMAKE_CXX_COMPILER=${CONSUMER_CXX_COMPILER}
    # A sanitized ember needs a sanitized consumer (the runtime comes with the link flags).
    "-DCMAKE_CXX_FLAGS=${CONSUMER_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${CONSUMER_FLAGS}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/ember-consumer)
message(STATUS "consumer built and ran against ${prefix}")
