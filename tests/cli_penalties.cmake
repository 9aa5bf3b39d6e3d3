# qkv run's penalty and stop flags on the shared stories260K model.
add_test(NAME cli_penalties
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_penalties.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(cli_penalties PROPERTIES TIMEOUT 120 LABELS "cli")
