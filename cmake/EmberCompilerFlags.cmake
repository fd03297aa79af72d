# Warnings and sanitizers, applied per target; the one global option is the floating-point
# contraction rule below, which every object must share.

function(ember_target_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>)
  elseif(MSVC)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:/W4>)
  endif()
endfunction()

# No FMA contraction anywhere: GCC fuses a * b + c by default (-ffp-contract=fast in its GNU
# modes) wherever the target has FMA, which the x86-64 baseline lacks and AArch64 has, so the
# same source rounded differently on arm64 than on x86 (every float expression of the files
# outside the kernels' -ffp-contract=off list) and the logits differed. Kernels fuse only where they say so (an
# explicit fused_multiply_add or FMA intrinsic, the same on every tier), and a model's logits
# are memcmp-equal on x86 and arm64 (tests/backend/test_isa_invariance.cpp). One global option
# so that no file is forgotten, the tests' references included.
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX,C>:-ffp-contract=off>")
endif()

# EMBER_SANITIZE=address,undefined or thread: every target of this tree gets the flags, so the
# library, the tests and the examples agree on the runtime.
if(EMBER_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "EMBER_SANITIZE needs GCC or Clang")
  endif()
  set(_ember_san_flags -fsanitize=${EMBER_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX,C>:${_ember_san_flags}>")
  add_link_options(${_ember_san_flags})
  # Clang cannot vectorise the loops marked `#pragma omp simd` around the sanitizers' checks,
  # and says so for each one (-Wpass-failed); in this build their speed is not the point.
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    add_compile_options("$<$<COMPILE_LANGUAGE:CXX,C>:-Wno-pass-failed>")
  endif()
endif()
