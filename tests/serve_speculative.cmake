# qkv serve's speculative decoding (a draft model and prompt lookup) against
# the server without it and qkv run, over HTTP on 127.0.0.1.
add_test(NAME serve_speculative
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_speculative.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(serve_speculative PROPERTIES TIMEOUT 300 LABELS "serve")
