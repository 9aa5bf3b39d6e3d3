# --poll on every command and the OpenMP wait policy the qkv executable sets from it.
add_test(NAME cli_poll COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_poll.sh $<TARGET_FILE:qkv>)
set_tests_properties(cli_poll PROPERTIES TIMEOUT 120 LABELS "cli")
