# Warnings and sanitizers, applied per target (no global add_definitions / add_compile_options).

function(ember_target_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>)
  elseif(MSVC)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:/W4>)
  endif()
endfunction()

# EMBER_SANITIZE=address,undefined or thread: every target of this tree gets the flags, so the
# library, the tests and the examples agree on the runtime.
if(EMBER_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "EMBER_SANITIZE needs GCC or Clang")
  endif()
  set(_ember_san_flags -fsanitize=${EMBER_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX,C>:${_ember_san_flags}>")
  add_link_options(${_ember_san_flags})
endif()
