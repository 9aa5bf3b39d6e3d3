# qkv's logits and greedy text on llama.cpp's quantized files against llama.cpp's.
add_test(NAME cli_quant_llama
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_quant_llama.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(cli_quant_llama PROPERTIES TIMEOUT 300 LABELS "cli")
