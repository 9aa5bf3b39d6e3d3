# Chat templates: `qkv template` against Python's jinja2 on real templates.
add_test(NAME chat_template_oracle
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/chat/template_oracle.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR}
                 ${PROJECT_BINARY_DIR})
set_tests_properties(chat_template_oracle PROPERTIES TIMEOUT 600 LABELS "cli")
