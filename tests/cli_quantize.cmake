# qkv quantize on the command line: llama.cpp's files byte for byte, bad input, full disk.
add_test(NAME cli_quantize
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_quantize.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(cli_quantize PROPERTIES TIMEOUT 300 LABELS "cli")
