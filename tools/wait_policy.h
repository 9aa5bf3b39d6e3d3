// --poll, accepted by every command: how long qkv's waiting threads spin
// before they block (kernels/threads/wait.h), and OpenMP's too (wait_policy.cc).
#pragma once

namespace qkv::tools {

// Removes every "--poll N" from argv[1..] (argv[0] is the command's name),
// sets the wait's spin time from the last, and returns the level; on a bad
// level prints an error naming it and returns -1.
int take_poll_flag(int* argc, char** argv);

}  // namespace qkv::tools
