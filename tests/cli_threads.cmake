# Command-line tests of the thread and placement flags (tools/thread_flags.h):
# bad values exit 2 naming the flag, pinning reaches the worker threads, and a
# placement leaves a 1-node machine's output unchanged.
add_test(NAME cli_threads
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_threads.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(cli_threads PROPERTIES TIMEOUT 300 LABELS "cli")
