# Command-line tests for qkv tokenize / detokenize / info on the shared models.
add_test(NAME cli_tokenize
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_tokenize.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(cli_tokenize PROPERTIES TIMEOUT 60 LABELS "cli")
