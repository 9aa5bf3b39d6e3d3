# Cross-builds qkv for aarch64 (Armv8-A Linux) on a Debian amd64 host with
# Debian's cross compiler and the arm64 multiarch -dev packages of the
# dependencies (scripts/setup.sh --tests installs them), and runs the built
# executables under qemu-user, so CTest runs the suites as on an ARM machine:
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake
#   QEMU_CPU=max ctest --test-dir build-aarch64 -L kernels
# QEMU_CPU picks the emulated core: "max" has SVE2 (Highway's SVE2 target),
# dot product, i8mm and bf16; "cortex-a53" is NEON only (the NEON target).
#
# oneDNN: libdnnl-dev:arm64 cannot be installed beside libdnnl-dev:amd64 (the
# two ship different /usr/include/oneapi/dnnl/dnnl_config.h: the amd64 build
# has an OpenCL GPU runtime), so this build has QKV_ONEDNN off and large
# batches run on qkv's own kernels.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# find_package looks in /usr/lib/aarch64-linux-gnu/cmake (and the
# architecture-independent /usr/lib/cmake, /usr/share), never in the host's
# /usr/lib/x86_64-linux-gnu.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# pkg-config reads the arm64 .pc files (PCRE2, utf8proc, cpp-httplib) and the
# architecture-independent ones, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(QKV_ONEDNN OFF CACHE BOOL "oneDNN for large batches (no co-installable arm64 package)")
# The benchmarks compare against oneDNN, and speed means nothing under qemu.
set(QKV_BUILD_BENCH OFF CACHE BOOL "Google Benchmark suites (none under emulation)")
# The arm64 libc6 from multiarch provides /lib/ld-linux-aarch64.so.1 and the
# libraries in /lib/aarch64-linux-gnu, which the executables load under qemu
# as on an ARM machine. No -L /usr/aarch64-linux-gnu: with it qemu takes the
# loader from the cross toolchain's libc6-arm64-cross while the loader finds
# libc.so.6 of the multiarch libc6:arm64, two builds of glibc (Debian 12:
# 2.36-8cross1 and 2.36-9+deb12u*) whose private loader state differs, and
# every thread creation (pthread_create, OpenMP) then hangs.
find_program(QKV_QEMU_AARCH64 qemu-aarch64)
if(NOT QKV_QEMU_AARCH64)
  message(FATAL_ERROR "qkv's aarch64 build runs its tests under qemu-aarch64: install the Debian package "
                      "'qemu-user' (scripts/setup.sh --tests installs it), then configure again.")
endif()
set(CMAKE_CROSSCOMPILING_EMULATOR ${QKV_QEMU_AARCH64})
