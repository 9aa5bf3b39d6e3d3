# qkv serve, driven over HTTP on 127.0.0.1 (free ports; servers always stopped).
add_test(NAME serve_curl
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_curl.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(serve_curl PROPERTIES TIMEOUT 240 LABELS "serve")
add_test(NAME serve_openai
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_openai.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR}
                 ${PROJECT_BINARY_DIR}/serve_npm)
set_tests_properties(serve_openai PROPERTIES TIMEOUT 300 LABELS "serve")
# Schema-constrained output (response_format, json_schema, grammar) checked with ajv.
add_test(NAME serve_schema
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_schema.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR}
                 ${PROJECT_BINARY_DIR}/serve_schema_npm)
set_tests_properties(serve_schema PROPERTIES TIMEOUT 600 LABELS "serve")
foreach(t load faults faults_volume)
  add_test(NAME serve_${t}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_node.sh serve_${t}.mjs $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
  set_tests_properties(serve_${t} PROPERTIES TIMEOUT 300 LABELS "serve;asan")
endforeach()
add_test(NAME serve_nginx
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_nginx.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(serve_nginx PROPERTIES TIMEOUT 180 LABELS "serve")
add_test(NAME serve_web
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_web.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR}
                 ${PROJECT_BINARY_DIR}/serve_web_npm ${PROJECT_BINARY_DIR}/test_output)
set_tests_properties(serve_web PROPERTIES TIMEOUT 300 LABELS "serve" SKIP_RETURN_CODE 77)
# The serving benchmark's machinery on the small model (its figures not checked).
add_test(NAME serve_bench_smoke
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/serve_bench_smoke.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR}
                 ${PROJECT_SOURCE_DIR}/bench/serve_bench.mjs)
set_tests_properties(serve_bench_smoke PROPERTIES TIMEOUT 240 LABELS "serve" SKIP_RETURN_CODE 77)
