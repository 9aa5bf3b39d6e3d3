# Flag parsing shared by every command (tools/args.h): a flag's value is never another flag.
add_test(NAME cli_flags COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_flags.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(cli_flags PROPERTIES TIMEOUT 60 LABELS "cli")
