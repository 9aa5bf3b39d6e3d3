# qkv serve with several models (-m twice, --models-dir), loaded on first use
# and unloaded by memory limit, count, idle time or request; over HTTP on
# 127.0.0.1. serve_models_asan: the same server checks in their quick form
# (one prompt; the two-model and --models-dir servers only), for the
# AddressSanitizer stage.
add_test(NAME serve_models
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_models.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(serve_models PROPERTIES TIMEOUT 300 LABELS "serve")
add_test(NAME serve_models_asan
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_models.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR} quick)
set_tests_properties(serve_models_asan PROPERTIES TIMEOUT 300 LABELS "serve;asan")
