# The VEX-encoded vpdpbusd (AVX-VNNI) in kernels/quant/vec_dot_avxvnni_vex.cc's
# object and in no other object of the library (AVX-512 VNNI CPUs such as
# Zen 4 fault on it; kernels/quant/vec_dot_avxvnni.h).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  add_test(NAME avxvnni_objdump
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/avxvnni_objdump.sh
                   "$<TARGET_OBJECTS:qkv_kernels>;$<TARGET_OBJECTS:qkv_runtime>")
  set_tests_properties(avxvnni_objdump PROPERTIES TIMEOUT 300 LABELS "kernels")
endif()
