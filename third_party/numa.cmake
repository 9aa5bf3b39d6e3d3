# NUMA node discovery and memory placement (kernels/threads/numa.cc) from
# Debian's libnuma-dev, optional: QKV_NUMA=AUTO (the default) uses it when
# found, ON requires it, OFF leaves it out (one node 0, no placement requests).
# Included by kernels/CMakeLists.txt, after qkv_deps exists.
set(QKV_NUMA AUTO CACHE STRING "Place threads and weights with libnuma: AUTO (when found), ON or OFF")
set_property(CACHE QKV_NUMA PROPERTY STRINGS AUTO ON OFF)
set(QKV_NUMA_FOUND OFF)
if(NOT QKV_NUMA STREQUAL "OFF")
  find_path(QKV_NUMA_INCLUDE_DIR numa.h)
  find_library(QKV_NUMA_LIBRARY numa)
  if(QKV_NUMA_INCLUDE_DIR AND QKV_NUMA_LIBRARY)
    set(QKV_NUMA_FOUND ON)
  elseif(QKV_NUMA STREQUAL "ON")
    qkv_require(QKV_NUMA_FOUND "libnuma (numa.h, libnuma.so) for QKV_NUMA=ON" libnuma-dev)
  endif()
endif()
# QKV_NUMA_LINK / QKV_NUMA_PC: what library.cmake and qkv.pc link for it.
set(QKV_NUMA_LINK "" CACHE INTERNAL "")
set(QKV_NUMA_PC "" CACHE INTERNAL "")
if(QKV_NUMA_FOUND)
  set(QKV_NUMA_LINK numa CACHE INTERNAL "")
  set(QKV_NUMA_PC " -lnuma" CACHE INTERNAL "")
  target_link_libraries(qkv_deps INTERFACE ${QKV_NUMA_LIBRARY})
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/threads/numa.cc PROPERTIES COMPILE_DEFINITIONS QKV_HAVE_NUMA=1)
  message(STATUS "qkv: NUMA placement through ${QKV_NUMA_LIBRARY}")
else()
  message(STATUS "qkv: no libnuma (QKV_NUMA=${QKV_NUMA}): one NUMA node, no placement requests")
endif()
