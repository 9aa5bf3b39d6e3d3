# aarch64: the suites of the optional instructions once more under
# QKV_ISA=neon, where SDOT, i8mm and BF16 must step aside
# (kernels/quant/vec_dot_select.cc, kernels/matmul_small/arm_bf16.cc) and the
# baseline kernels give the same results (bit for bit for the block types). Run under qemu-aarch64 by
# the CI's aarch64 stage on every core model (neon is every core's baseline).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  foreach(suite test_arm_dotprod test_arm_i8mm test_arm_bf16)
    add_test(NAME isa_neon_${suite} COMMAND ${suite})
    set_tests_properties(isa_neon_${suite} PROPERTIES TIMEOUT 300 ENVIRONMENT "QKV_ISA=neon" LABELS "kernels;isa")
  endforeach()
  # The SDOT GEMM runs only on a core with the dot product and without i8mm,
  # which neither of the loop's cores is: a Neoverse N1 (as a Graviton 2),
  # once as itself and once under the neon cap. The label (no "kernels") keeps
  # these out of the loop over cores; scripts/test.sh runs them once.
  add_test(NAME sdot_core_test_arm_dotprod_gemm COMMAND test_arm_dotprod_gemm)
  add_test(NAME sdot_core_isa_neon_test_arm_dotprod_gemm COMMAND test_arm_dotprod_gemm)
  set_tests_properties(sdot_core_test_arm_dotprod_gemm PROPERTIES TIMEOUT 300 ENVIRONMENT "QEMU_CPU=neoverse-n1"
                       LABELS "arm_sdot_core")
  set_tests_properties(sdot_core_isa_neon_test_arm_dotprod_gemm PROPERTIES TIMEOUT 300
                       ENVIRONMENT "QEMU_CPU=neoverse-n1;QKV_ISA=neon" LABELS "arm_sdot_core;isa")
endif()
