// qkv tokenize / qkv detokenize: text <-> token ids with a model's vocabulary
// (a GGUF's own, or a llama2.c tokenizer.bin named with -z).
//
// NOTE: reconstructed. The original of this file (by the tokenizer/loader
// engineer, 16:25) was overwritten by mistake at 16:39 by the C API helper;
// this version rebuilds it from its usage text and tests/cli_tokenize.sh.
// Its owner should compare it with their own copy and replace it if needed.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "runtime/gguf.h"
#include "runtime/model_loader.h"
#include "runtime/tokenizer.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace qkv::tools {

namespace {

const char* kTokenizeUsage =
    "usage: qkv tokenize -m MODEL [-z TOKENIZER] [--no-bos] [--eos] [--] TEXT...\n"
    "  prints the token ids of TEXT (the arguments joined by spaces), space-separated\n"
    "  -m, --model PATH      GGUF (its vocabulary) or llama2.c checkpoint\n"
    "  -z, --tokenizer PATH  llama2.c tokenizer.bin or GGUF vocabulary (needed for llama2.c models)\n"
    "  --no-bos              do not prepend BOS\n"
    "  --eos                 append EOS\n";
const char* kDetokenizeUsage =
    "usage: qkv detokenize -m MODEL [-z TOKENIZER] [--] [ID...]\n"
    "  prints the text of the token ids (from the arguments, or whitespace-separated on stdin)\n"
    "  -m, --model PATH      GGUF (its vocabulary) or llama2.c checkpoint\n"
    "  -z, --tokenizer PATH  llama2.c tokenizer.bin or GGUF vocabulary (needed for llama2.c models)\n";

struct Args {
  std::string model, tokenizer;
  bool bos = true, eos = false;
  std::vector<std::string> words;  // TEXT words or IDs
};

bool looks_like_number(const std::string& a) {
  size_t i = a[0] == '-' ? 1 : 0;
  return i < a.size() && a.find_first_not_of("0123456789", i) == std::string::npos;
}

// Parses the shared flags; returns false (after printing why) on a bad one.
bool parse(const char* cmd, int argc, char** argv, bool tokenize, Args& out, bool& help) {
  bool rest = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (rest || a.empty() || a[0] != '-' || a == "-" || (!tokenize && looks_like_number(a))) {
      out.words.push_back(a);
    } else if (a == "--") {
      rest = true;
    } else if (a == "-h" || a == "--help") {
      help = true;
      return true;
    } else if (a == "-m" || a == "--model") {
      out.model = flag_value(argc, argv, i);
    } else if (a == "-z" || a == "--tokenizer") {
      out.tokenizer = flag_value(argc, argv, i);
    } else if (tokenize && a == "--no-bos") {
      out.bos = false;
    } else if (tokenize && a == "--eos") {
      out.eos = true;
    } else {
      std::fprintf(stderr, "qkv %s: unknown flag '%s'\n\n%s", cmd, argv[i],
                   tokenize ? kTokenizeUsage : kDetokenizeUsage);
      return false;
    }
  }
  if (out.model.empty() && out.tokenizer.empty()) {
    std::fprintf(stderr, "qkv %s: -m MODEL (or -z TOKENIZER) is required\n\n%s", cmd,
                 tokenize ? kTokenizeUsage : kDetokenizeUsage);
    return false;
  }
  return true;
}

// The vocabulary: -z when given (sized by a llama2.c model's header when -m
// names one, as run.c does), else the GGUF model's own.
Tokenizer load_tokenizer(const Args& a) {
  if (!a.tokenizer.empty()) {
    int64_t vocab = -1;
    if (!a.model.empty() && detect_model_format(a.model) == ModelFormat::Llama2c) {
      vocab = load_llama2c_model(a.model).config.vocab_size;
    }
    return Tokenizer::load(a.tokenizer, vocab);
  }
  if (detect_model_format(a.model) == ModelFormat::Llama2c) {
    fail("'", a.model, "' is a llama2.c checkpoint, which has no vocabulary: name its tokenizer.bin with -z");
  }
  return Tokenizer::from_gguf(GGUFFile::open(a.model));
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  Args a;
  bool help = false;
  if (!parse("tokenize", argc, argv, true, a, help)) return 2;
  if (help) {
    std::fputs(kTokenizeUsage, stdout);
    return 0;
  }
  if (a.words.empty()) {
    std::fprintf(stderr, "qkv tokenize: TEXT is required\n\n%s", kTokenizeUsage);
    return 2;
  }
  std::string text;
  for (size_t i = 0; i < a.words.size(); ++i) text += (i ? " " : "") + a.words[i];
  const Tokenizer tok = load_tokenizer(a);
  const std::vector<int32_t> ids = tok.encode(text, a.bos, a.eos);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  std::printf("%s\n", line.c_str());
  return 0;
}

int cmd_detokenize(int argc, char** argv) {
  Args a;
  bool help = false;
  if (!parse("detokenize", argc, argv, false, a, help)) return 2;
  if (help) {
    std::fputs(kDetokenizeUsage, stdout);
    return 0;
  }
  if (a.words.empty()) {
    for (std::string w; std::cin >> w;) a.words.push_back(w);
  }
  const Tokenizer tok = load_tokenizer(a);
  std::vector<int32_t> ids;
  for (const std::string& w : a.words) {
    ids.push_back(static_cast<int32_t>(parse_int("ID", w.c_str(), 0, tok.vocab_size() - 1)));
  }
  const std::string text = tok.decode(ids);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::printf("\n");
  return 0;
}

}  // namespace qkv::tools
