// qkv template: prints a model's chat template rendered with a conversation,
// exactly (no newline added), for debugging prompts and for tests.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/error.h"
#include "runtime/chat_template.h"
#include "runtime/gguf.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace qkv::tools {

namespace {

const char* kUsage =
    "usage: qkv template -m MODEL --messages FILE.json [--template FILE.jinja] [--no-generation-prompt]\n"
    "  prints the chat prompt the model's template (tokenizer.chat_template) makes of a conversation\n"
    "  -m, --model PATH          GGUF file (its template, BOS and EOS tokens)\n"
    "  --messages FILE           JSON: an array of {role, content} messages, or an object with\n"
    "                            \"messages\" (and \"tools\" or other template variables)\n"
    "  --template FILE           use this Jinja template instead of the model's\n"
    "  --no-generation-prompt    render with add_generation_prompt = false\n";

std::string read_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open the ", what, " file '", path, "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

int cmd_template(int argc, char** argv) {
  std::string model, messages, tmpl_path;
  bool gen = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "-m" || a == "--model") {
      model = flag_value(argc, argv, i);
    } else if (a == "--messages") {
      messages = flag_value(argc, argv, i);
    } else if (a == "--template") {
      tmpl_path = flag_value(argc, argv, i);
    } else if (a == "--no-generation-prompt") {
      gen = false;
    } else {
      std::fprintf(stderr, "qkv template: unknown argument '%s'\n\n%s", argv[i], kUsage);
      return 2;
    }
  }
  if (model.empty() || messages.empty()) {
    std::fprintf(stderr, "qkv template: -m MODEL and --messages FILE are required\n\n%s", kUsage);
    return 2;
  }
  ChatTemplate t = chat_template_of(GGUFFile::open(model));
  if (!tmpl_path.empty()) t.source = read_file(tmpl_path, "template");
  const std::string out = render_chat(t, read_file(messages, "messages"), gen);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace qkv::tools
