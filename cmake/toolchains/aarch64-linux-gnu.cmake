# Linux arm64 from x86-64 with Debian's cross compiler (g++-aarch64-linux-gnu); tests run under
# qemu-user (qemu-aarch64-static), whose CPU model EMBER_QEMU_CPU picks (e.g. cortex-a53 for
# NEON alone, neoverse-n1 for dotprod, max for i8mm).
#   cmake -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
if(NOT DEFINED EMBER_QEMU_CPU)
  set(EMBER_QEMU_CPU max)
endif()
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static;-cpu;${EMBER_QEMU_CPU};-L;/usr/aarch64-linux-gnu)
