# Command-line tests for qkv embed on the shared embedding models and llama-embedding's references.
add_test(NAME cli_embed
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_embed.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(cli_embed PROPERTIES TIMEOUT 120 LABELS "cli")
