# qkv run/chat/serve --memory-limit on a synthetic tiny model.
add_test(NAME cli_memory_limit
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_memory_limit.sh $<TARGET_FILE:qkv>)
set_tests_properties(cli_memory_limit PROPERTIES TIMEOUT 60 LABELS "cli")
