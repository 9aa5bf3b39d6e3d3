# Tool calls parsed out of generated text: the doctest suite links nlohmann
# (it compares arguments as parsed JSON), and the oracle renders assistant turns
# with Python's jinja2 from every shared template and parses them back.
target_link_libraries(test_tool_calls PRIVATE nlohmann_json::nlohmann_json)
add_test(NAME tool_calls_oracle
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tool_calls_oracle.sh $<TARGET_FILE:test_tool_calls> ${QKV_SHARED_DIR}
                 ${PROJECT_BINARY_DIR})
set_tests_properties(tool_calls_oracle PROPERTIES TIMEOUT 600 LABELS "cli")
