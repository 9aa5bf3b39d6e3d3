# qkv run's speculative decoding flags on the trained pair (stories260K drafting for tinystories-3M).
add_test(NAME cli_speculative
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_speculative.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(cli_speculative PROPERTIES TIMEOUT 180 LABELS "cli")
