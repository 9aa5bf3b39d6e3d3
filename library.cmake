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
target_link_libraries(qkv_shared PRIVATE hwy::hwy DNNL::dnnl OpenMP::OpenMP_CXX Threads::Threads)
# A static archive carries its dependencies' link lines to the consumer.
target_link_libraries(qkv_static INTERFACE hwy::hwy DNNL::dnnl OpenMP::OpenMP_CXX Threads::Threads)
target_link_options(qkv_shared PRIVATE -Wl,--exclude-libs,ALL -Wl,--no-undefined)
if(QKV_SANITIZE OR QKV_TSAN)
  target_link_libraries(qkv_shared PRIVATE qkv_flags)
endif()

install(FILES ${PROJECT_SOURCE_DIR}/include/qkv.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS qkv_shared qkv_static EXPORT qkvTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT qkvTargets NAMESPACE qkv:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/qkv)
configure_package_config_file(${PROJECT_SOURCE_DIR}/third_party/qkv-config.cmake.in
  ${PROJECT_BINARY_DIR}/qkv-config.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/qkv)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/qkv-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/qkv-config.cmake ${PROJECT_BINARY_DIR}/qkv-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/qkv)
configure_file(${PROJECT_SOURCE_DIR}/third_party/qkv.pc.in ${PROJECT_BINARY_DIR}/qkv.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/qkv.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
