# qkv tokenize --file / detokenize -o byte for byte on the shared vocabularies.
add_test(NAME cli_tokenize_file
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_tokenize_file.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(cli_tokenize_file PROPERTIES TIMEOUT 300 LABELS "cli")
