# Tool calls and reasoning on /v1/chat/completions through the openai client,
# one server per tool-call family's chat template (serve_tools.sh).
add_test(NAME serve_tools
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_tools.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR}
                 ${PROJECT_BINARY_DIR}/serve_tools_npm)
set_tests_properties(serve_tools PROPERTIES TIMEOUT 240 LABELS "serve")
