# Every qkv output on a full (64 KiB tmpfs) disk is a clear error and leaves no file.
add_test(NAME cli_disk_full COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_disk_full.sh $<TARGET_FILE:qkv>)
set_tests_properties(cli_disk_full PROPERTIES TIMEOUT 300 LABELS "cli")
