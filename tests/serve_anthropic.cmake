# Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens) driven
# by the official @anthropic-ai/sdk client.
add_test(NAME serve_anthropic
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_anthropic.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR}
                 ${PROJECT_BINARY_DIR}/serve_anthropic_npm)
set_tests_properties(serve_anthropic PROPERTIES TIMEOUT 300 LABELS "serve")
