# Command-line tests for qkv attention: SVG structure, JSON, bad usage, and a
# headless-Chromium render of the SVG (skipped with a message without chromium).
add_test(NAME cli_attention
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_attention.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(cli_attention PROPERTIES TIMEOUT 120 LABELS "cli")
