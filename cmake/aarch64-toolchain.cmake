# Cross toolchain for aarch64 Linux on an x86_64 Debian host (g++-aarch64-linux-gnu,
# qemu-user-static). Code generators (flatc) and CMake packages (pybind11, FlatBuffers headers)
# come from the host; libraries and the C runtime from the cross sysroot.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)   # flatc must run on the host
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)    # FlatBuffers and pybind11 headers are arch-neutral
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)    # host pybind11 / FlatBuffers CMake configs

# Runs target binaries (try_run, ctest). MSV0_ARM_SYSROOT may name a fuller sysroot, e.g. the
# Python one scripts/build_aarch64.sh makes; the cross compiler's own is enough for plain C++.
if(NOT MSV0_ARM_SYSROOT)
  set(MSV0_ARM_SYSROOT /usr/aarch64-linux-gnu)
endif()
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static -L ${MSV0_ARM_SYSROOT})
