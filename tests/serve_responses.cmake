# OpenAI Responses API (POST /v1/responses) driven by the official openai
# client, its outputs checked with ajv (serve_responses.sh / .mjs).
add_test(NAME serve_responses
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_responses.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR}
                 ${PROJECT_BINARY_DIR}/serve_responses_npm)
set_tests_properties(serve_responses PROPERTIES TIMEOUT 300 LABELS "serve")
