// The model-store subcommands of the qkv command line (tools/qkv_main.cc lists
// them): pull, list, rm. Same contract as tools/commands.h.
#pragma once

namespace qkv::tools::models {

int cmd_pull(int argc, char** argv);
int cmd_list(int argc, char** argv);
int cmd_rm(int argc, char** argv);

}  // namespace qkv::tools::models
