# The Ollama API of qkv serve (/api/chat, /api/generate, /api/tags, /api/show,
# /api/ps, /api/version) through the official Ollama JavaScript client.
add_test(NAME serve_ollama
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_ollama.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR}
                 ${PROJECT_BINARY_DIR}/serve_ollama_npm)
set_tests_properties(serve_ollama PROPERTIES TIMEOUT 300 LABELS "serve")
