# Hugging Face's tokenizer (npm) as the reference for qkv's ids on the Llama 3,
# Qwen 3 and Gemma 3 vocabularies (GGUF and tokenizer.json); skipped (exit 77) when npm or node is absent.
add_executable(tokenizer_hf_check tokenizer_hf_check.cc)
target_link_libraries(tokenizer_hf_check PRIVATE qkv_internal nlohmann_json::nlohmann_json)
add_test(NAME tokenizer_hf
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer_hf.sh $<TARGET_FILE:tokenizer_hf_check> $<TARGET_FILE:qkv>
                 ${QKV_SHARED_DIR} ${PROJECT_BINARY_DIR}/npm-tokenizers ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer_hf.mjs)
set_tests_properties(tokenizer_hf PROPERTIES TIMEOUT 300 LABELS "tokenizer" SKIP_RETURN_CODE 77)
