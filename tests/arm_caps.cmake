# aarch64: the int8 dot-product suites once more under QKV_ISA=neon, where
# SDOT and i8mm must step aside (kernels/quant/vec_dot_select.cc) and the
# scalar kernels give the same results bit for bit. Run under qemu-aarch64 by
# the CI's aarch64 stage on every core model (neon is every core's baseline).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  foreach(suite test_arm_dotprod test_arm_i8mm)
    add_test(NAME isa_neon_${suite} COMMAND ${suite})
    set_tests_properties(isa_neon_${suite} PROPERTIES TIMEOUT 300 ENVIRONMENT "QKV_ISA=neon" LABELS "kernels;isa")
  endforeach()
endif()
