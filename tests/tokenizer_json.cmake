# The tokenizer oracle suite reads JSON lines.
target_link_libraries(test_tokenizer_oracles PRIVATE nlohmann_json::nlohmann_json)
