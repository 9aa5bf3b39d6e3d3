// qkv tokenize / qkv detokenize: text to token ids and back with a model's
// vocabulary (GGUF tokenizer.ggml.*), a llama2.c tokenizer.bin or a Hugging
// Face tokenizer.json (-z).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "runtime/atomic_file.h"
#include "runtime/gguf.h"
#include "runtime/model_loader.h"
#include "runtime/tokenizer.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace qkv::tools {

namespace {

const char* kTokenizeUsage =
    "usage: qkv tokenize -m MODEL [-z TOKENIZER] [--no-bos] [--eos] [--special] [-f FILE | [--] TEXT...]\n"
    "  prints the token ids of TEXT (the arguments joined by spaces), space-separated\n"
    "  -m, --model PATH      GGUF (its vocabulary) or llama2.c checkpoint\n"
    "  -z, --tokenizer PATH  llama2.c tokenizer.bin, GGUF vocabulary or Hugging Face tokenizer.json (with its\n"
    "                        tokenizer_config.json); needed for llama2.c models\n"
    "  -f, --file FILE       the text is FILE's bytes, exactly (NUL bytes, CRLF and all); - for stdin\n"
    "  --special             control tokens written in the text (<|im_start|>, <|eot_id|>) become their ids\n"
    "  --no-bos              do not prepend BOS (by default BOS/EOS as the vocabulary's add_bos_token /\n"
    "                        add_eos_token say)\n"
    "  --eos                 append EOS\n";

const char* kDetokenizeUsage =
    "usage: qkv detokenize -m MODEL [-z TOKENIZER] [--special] [-f IDS] [-o OUT] [--] [ID...]\n"
    "  prints the text of the token ids (from the arguments, IDS, or whitespace-separated on stdin)\n"
    "  -m, --model PATH      GGUF (its vocabulary) or llama2.c checkpoint\n"
    "  -z, --tokenizer PATH  llama2.c tokenizer.bin, GGUF vocabulary or Hugging Face tokenizer.json (with its\n"
    "                        tokenizer_config.json); needed for llama2.c models\n"
    "  -f, --file IDS        read the ids from the file IDS\n"
    "  -o, --output OUT      write the text's bytes to OUT exactly (no newline added): the reverse of\n"
    "                        tokenize --file\n"
    "  --special             control tokens give their text (<|im_end|>) instead of nothing\n";

struct Options {
  std::string model, tokenizer, file, output;
  bool no_bos = false, eos = false, special = false;
  std::vector<std::string> positional;
};

// Parses the shared flags; returns -1 to continue or an exit code.
int parse(int argc, char** argv, bool tokenize, Options* o) {
  const char* usage = tokenize ? kTokenizeUsage : kDetokenizeUsage;
  bool only_positional = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (only_positional || a.empty() || a[0] != '-' || a == "-") {
      o->positional.push_back(a);
    } else if (a == "--") {
      only_positional = true;
    } else if (a == "-h" || a == "--help") {
      std::fputs(usage, stdout);
      return 0;
    } else if (a == "-m" || a == "--model") {
      o->model = flag_value(argc, argv, i);
    } else if (a == "-z" || a == "--tokenizer") {
      o->tokenizer = flag_value(argc, argv, i);
    } else if (a == "-f" || a == "--file") {
      o->file = flag_value(argc, argv, i);
    } else if (!tokenize && (a == "-o" || a == "--output")) {
      o->output = flag_value(argc, argv, i);
    } else if (a == "--special") {
      o->special = true;
    } else if (tokenize && a == "--no-bos") {
      o->no_bos = true;
    } else if (tokenize && a == "--eos") {
      o->eos = true;
    } else if (!tokenize && a.size() > 1 && a[1] >= '0' && a[1] <= '9') {
      o->positional.push_back(a);  // a negative id: rejected with a clear error later
    } else {
      std::fprintf(stderr, "qkv %s: unknown flag '%s'\n\n%s", argv[0], argv[i], usage);
      return 2;
    }
  }
  if (o->model.empty() && o->tokenizer.empty()) {
    std::fprintf(stderr, "qkv %s: -m MODEL (or -z TOKENIZER) is required\n\n%s", argv[0], usage);
    return 2;
  }
  return -1;
}

// A file's bytes exactly ("-": standard input).
std::string read_bytes(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::ifstream in(path, std::ios::binary);
  QKV_CHECK(in.good(), "cannot open '", path, "'");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  QKV_CHECK(!in.bad(), "cannot read '", path, "'");
  return bytes;
}

// The vocabulary: -z when given (its size from a llama2.c model when there is
// one), otherwise the GGUF model's own tokenizer.ggml.* keys.
Tokenizer open_tokenizer(const Options& o) {
  if (!o.tokenizer.empty()) {
    int64_t vocab = -1;
    if (!o.model.empty() && detect_model_format(o.model) == ModelFormat::Llama2c) {
      vocab = load_llama2c_model(o.model).config.vocab_size;  // mmap only: cheap
    }
    return Tokenizer::load(o.tokenizer, vocab);
  }
  if (detect_model_format(o.model) != ModelFormat::GGUF) {
    fail("'", o.model, "' is a llama2.c checkpoint, which has no vocabulary: name its tokenizer.bin with -z");
  }
  return Tokenizer::from_gguf(GGUFFile::open(o.model));
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  Options o;
  if (const int rc = parse(argc, argv, true, &o); rc >= 0) return rc;
  if (o.positional.empty() == o.file.empty()) {
    std::fprintf(stderr, "qkv tokenize: TEXT is required (or -f FILE, not both)\n\n%s", kTokenizeUsage);
    return 2;
  }
  std::string text;
  if (!o.file.empty()) {
    text = read_bytes(o.file);
  } else {
    for (size_t i = 0; i < o.positional.size(); ++i) text += (i ? " " : "") + o.positional[i];
  }
  const Tokenizer tok = open_tokenizer(o);
  const std::vector<int32_t> ids =
      tok.encode(text, !o.no_bos && tok.add_bos(), o.eos || (!o.no_bos && tok.add_eos()), o.special);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  std::printf("%s\n", line.c_str());
  return 0;
}

int cmd_detokenize(int argc, char** argv) {
  Options o;
  if (const int rc = parse(argc, argv, false, &o); rc >= 0) return rc;
  std::vector<std::string> words = o.positional;
  if (!o.file.empty() || words.empty()) {
    std::istringstream in(o.file.empty() ? std::string(std::istreambuf_iterator<char>(std::cin), {})
                                         : read_bytes(o.file));
    std::string w;
    while (in >> w) words.push_back(w);
  }
  const Tokenizer tok = open_tokenizer(o);
  std::vector<int32_t> ids;
  for (const std::string& w : words) {
    ids.push_back(static_cast<int32_t>(parse_int("ID", w.c_str(), 0, tok.vocab_size() - 1)));
  }
  const std::string text = tok.decode(ids, o.special);
  if (!o.output.empty()) {
    write_file_atomically(o.output, text);
    return 0;
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace qkv::tools
