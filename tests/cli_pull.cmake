# qkv pull, -hf, ollama:, list and rm against a local hub (tests/hub_server.py) on 127.0.0.1.
add_test(NAME cli_pull COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_pull.sh $<TARGET_FILE:qkv>)
set_tests_properties(cli_pull PROPERTIES TIMEOUT 180 LABELS "cli")
