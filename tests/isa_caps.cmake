# The kernel suites once more under each ISA cap below this host's best
# (tests/isa_caps.sh skips a cap the CPU or build cannot run), so that an
# AVX-512 VNNI machine also covers the AVX2 and AVX-512-without-VNNI paths
# (and, with AVX-VNNI too, the AVX-VNNI kernels);
# and the cap's command-line behaviour (tests/isa_caps_cli.sh).
# Only fast suites whose kernels have per-target paths (a few seconds each).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  foreach(level avx2 avx2-vnni avx512)
    foreach(suite test_isa_cap test_quant_gemm_hwy test_quant_matvec test_matmul_small test_linear test_avx2_lanes
                  test_quant_row_groups)
      add_test(NAME isa_${level}_${suite}
               COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/isa_caps.sh $<TARGET_FILE:qkv> ${level} $<TARGET_FILE:${suite}>
               WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
      set_tests_properties(isa_${level}_${suite} PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS "isa")
    endforeach()
  endforeach()
endif()
add_test(NAME isa_caps_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/isa_caps_cli.sh $<TARGET_FILE:qkv>)
set_tests_properties(isa_caps_cli PROPERTIES TIMEOUT 120 LABELS "cli;isa")
