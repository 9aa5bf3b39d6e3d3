# scripts/speed_table.sh's argument errors (nothing is measured).
add_test(NAME speed_table_args COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/speed_table_args.sh $<TARGET_FILE:qkv>)
set_tests_properties(speed_table_args PROPERTIES TIMEOUT 60 LABELS "cli")
