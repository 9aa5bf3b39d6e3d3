# The public libraries, libqkv.so and libqkv.a, built from the same objects as
# qkv_internal, and what `cmake --install` puts on disk: include/qkv.h, both
# libraries, a CMake package (find_package(qkv CONFIG) -> qkv::qkv) and qkv.pc.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(qkv_shared SHARED $<TARGET_OBJECTS:qkv_kernels> $<TARGET_OBJECTS:qkv_runtime>)
add_library(qkv_static STATIC $<TARGET_OBJECTS:qkv_kernels> $<TARGET_OBJECTS:qkv_runtime>)
foreach(lib qkv_shared qkv_static)
  set_target_properties(${lib} PROPERTIES OUTPUT_NAME qkv)
  target_include_directories(${lib} INTERFACE
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()
set_target_properties(qkv_shared PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
                                            EXPORT_NAME qkv_shared)
set_target_properties(qkv_static PROPERTIES EXPORT_NAME qkv_static)
target_link_libraries(qkv_shared PRIVATE hwy::hwy ${QKV_ONEDNN_TARGET} OpenMP::OpenMP_CXX Threads::Threads
  PkgConfig::PCRE2 PkgConfig::UTF8PROC ${QKV_NUMA_LINK})
# A static archive carries its dependencies' link lines to the consumer.
target_link_libraries(qkv_static INTERFACE hwy::hwy ${QKV_ONEDNN_TARGET} OpenMP::OpenMP_CXX Threads::Threads pcre2-8 utf8proc ${QKV_NUMA_LINK})

# -fvisibility=hidden keeps qkv's own symbols private, but template code
# instantiated from the standard library's and Highway's headers still comes out
# with default visibility (e.g. std::vector<float>::_M_realloc_insert). A version
# script makes the rule exact: qkv_* is the whole dynamic interface. The test
# qkv_exports (tests/install.cmake) checks it with nm -D.
set(QKV_VERSION_SCRIPT ${PROJECT_BINARY_DIR}/qkv.map)
file(WRITE ${QKV_VERSION_SCRIPT} "{\n  global: qkv_*;\n  local: *;\n};\n")
target_link_options(qkv_shared PRIVATE -Wl,--version-script=${QKV_VERSION_SCRIPT}
                    -Wl,--exclude-libs,ALL -Wl,--no-undefined)
set_target_properties(qkv_shared PROPERTIES LINK_DEPENDS ${QKV_VERSION_SCRIPT})
if(QKV_SANITIZE OR QKV_TSAN OR QKV_FUZZ)
  target_link_libraries(qkv_shared PRIVATE qkv_flags)
endif()

install(FILES ${PROJECT_SOURCE_DIR}/include/qkv.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Two export sets, so a consumer of the shared library needs none of the
# static archive's dependencies (Highway, oneDNN, OpenMP development files).
install(TARGETS qkv_shared EXPORT qkvSharedTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS qkv_static EXPORT qkvStaticTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT qkvSharedTargets NAMESPACE qkv:: FILE qkv-shared-targets.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/qkv)
install(EXPORT qkvStaticTargets NAMESPACE qkv:: FILE qkv-static-targets.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/qkv)
configure_package_config_file(${PROJECT_SOURCE_DIR}/third_party/qkv-config.cmake.in
  ${PROJECT_BINARY_DIR}/qkv-config.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/qkv)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/qkv-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/qkv-config.cmake ${PROJECT_BINARY_DIR}/qkv-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/qkv)

# qkv.pc finds its prefix from its own location (${pcfiledir}), so it stays
# right for `cmake --install --prefix DIR` and for a moved install tree.
file(RELATIVE_PATH QKV_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
string(REGEX REPLACE "/$" "" QKV_PC_TO_PREFIX "${QKV_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/third_party/qkv.pc.in ${PROJECT_BINARY_DIR}/qkv.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/qkv.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
