# qkv run's and qkv bench's cold-start figures: load to first token on a fresh process.
add_test(NAME cli_cold_start COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_cold_start.sh $<TARGET_FILE:qkv>)
set_tests_properties(cli_cold_start PROPERTIES TIMEOUT 120 LABELS "cli")
