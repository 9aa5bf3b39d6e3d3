# Speculative decoding's counts and per-request settings on the Anthropic,
# Responses and Ollama APIs of qkv serve, through their official Node clients.
add_test(NAME serve_speculative_apis
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_speculative_apis.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR}
                 ${PROJECT_BINARY_DIR}/serve_speculative_npm)
set_tests_properties(serve_speculative_apis PROPERTIES TIMEOUT 300 LABELS "serve")
