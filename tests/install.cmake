# The installed library as a program that links it sees it: `cmake --install`
# into a temporary prefix, the exported symbols (qkv_* only), then
# examples/ built against the prefix with find_package (shared and static) and
# with pkg-config and a plain compiler line (shared and static), each run and
# compared with `qkv run`. Needs the qkv, qkv_shared and qkv_static targets built
# (a plain `cmake --build` builds them). Not in sanitizer builds: their
# libraries need the sanitizer runtime linked into the consumer as well.
if(NOT QKV_SANITIZE AND NOT QKV_TSAN AND NOT QKV_FUZZ)
  add_test(NAME install_consumer
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install_consumer.sh
                   ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR} ${QKV_SHARED_DIR} ${CMAKE_C_COMPILER} ${CMAKE_COMMAND})
  set_tests_properties(install_consumer PROPERTIES TIMEOUT 300 LABELS install)
endif()
