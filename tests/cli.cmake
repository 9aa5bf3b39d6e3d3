# Command-line tests: the qkv binary against llama2.c's reference output.
add_test(NAME cli_greedy_reference
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/run_reference.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(cli_greedy_reference PROPERTIES TIMEOUT 300 LABELS "cli")
