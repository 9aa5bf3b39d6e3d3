# The embedding and rerank endpoints of qkv serve (/v1/embeddings, /api/embed,
# /api/embeddings, /v1/rerank) through the official openai and ollama
# JavaScript clients, against llama.cpp's reference vectors.
add_test(NAME serve_embed
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_embed.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR}
                 ${PROJECT_BINARY_DIR}/serve_embed_npm)
set_tests_properties(serve_embed PROPERTIES TIMEOUT 360 LABELS "serve")
