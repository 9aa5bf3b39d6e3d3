# qkv chat: a scripted conversation through a pipe (replies against qkv run,
# prefill counts against qkv template + qkv tokenize, a full context) and a
# session in a terminal (tmux: typing, Ctrl-C, /exit).
find_program(QKV_PYTHON3 python3)
if(QKV_PYTHON3)
  add_test(NAME chat_pipe COMMAND ${QKV_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/chat/chat_pipe.py $<TARGET_FILE:qkv>
                                  ${QKV_SHARED_DIR})
  set_tests_properties(chat_pipe PROPERTIES TIMEOUT 300 LABELS "cli")
endif()
add_test(NAME chat_tty COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/chat/chat_tty.sh $<TARGET_FILE:qkv> ${QKV_SHARED_DIR})
set_tests_properties(chat_tty PROPERTIES TIMEOUT 300 LABELS "cli")
