# Command-line tests for qkv perplexity (output as llama-perplexity prints it).
add_test(NAME cli_perplexity
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_perplexity.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(cli_perplexity PROPERTIES TIMEOUT 120 LABELS "cli")
