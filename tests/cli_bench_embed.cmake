# qkv make-model for an encoder preset, qkv embed and qkv bench --embed on it (no shared data needed).
add_test(NAME cli_bench_embed COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_bench_embed.sh $<TARGET_FILE:qkv>)
set_tests_properties(cli_bench_embed PROPERTIES TIMEOUT 120 LABELS "cli")
