// qkv embed: embeddings (or rerank scores) of texts, with llama-embedding's
// flags and printed formats: the plain listing with the cosine similarity
// matrix, "array", OpenAI-style "json" and "json+" (json with the matrix).
// The texts are -p's or -f's split at the separator, or one per argument.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "qkv.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/models/model_ref.h"
#include "tools/thread_flags.h"

namespace qkv::tools {

namespace {

const char* kUsage =
    "usage: qkv embed -m MODEL [-p TEXT | -f FILE | [--] TEXT...] [options]\n"
    "  prints the embedding of each input text (or its rerank score), as llama-embedding does\n"
    "  -m, --model PATH            GGUF embedding model: bert, nomic-bert, a bert reranker, or a decoder\n"
    "                              (qwen2, qwen3, llama: its final normed hidden states are pooled)\n"
    "  -p, --prompt TEXT           the inputs: TEXT split at the separator (\\n, \\t, \\\\, \\\", \\xHH in it\n"
    "                              are escapes, as llama-embedding reads -p)\n"
    "  -f, --file FILE             the inputs: FILE's text (one trailing newline dropped, escapes read as\n"
    "                              for -p) split at the separator; - for standard input\n"
    "  TEXT...                     the inputs: one per argument, taken as they are\n"
    "  --no-escape                 read no escapes in -p and -f text\n"
    "  --pooling NAME              none (every token), mean, cls, last or rank (default: the model's)\n"
    "  --embd-normalize N          -1 none, 0 max absolute scaled to int16, 1 taxicab, 2 Euclidean (default),\n"
    "                              > 2 p-norm; ignored for rank scores\n"
    "  --embd-separator S          what splits -p/-f text into inputs (default \"\\n\")\n"
    "  --embd-output-format F      '' (default: a listing and the cosine similarity matrix), array\n"
    "                              ([[...],...]), json (OpenAI style) or json+ (json and the matrix)\n"
    "  --json                      --embd-output-format json\n"
    "  --dimensions N              keep the first N values of each embedding, then normalize (Matryoshka)\n"
    "  --truncate                  an input over the model's context keeps its first tokens and its last\n"
    "                              (without it such an input is an error)\n"
    "  -t, --threads N             threads (default: one per physical core)\n"
    "  -b, --batch-size N          tokens per forward pass (default 2048)\n";

struct Options {
  std::string model, prompt, file, separator = "\n", format;
  bool have_prompt = false, escape = true, truncate = false;
  std::vector<std::string> texts;
  int pooling = QKV_POOLING_DEFAULT;
  int normalize = 2;
  int64_t dimensions = 0, batch = 0;
  int threads = 0;
};

int parse_pooling(const char* s) {
  const std::string v = s;
  if (v == "none") return QKV_POOLING_NONE;
  if (v == "mean") return QKV_POOLING_MEAN;
  if (v == "cls") return QKV_POOLING_CLS;
  if (v == "last") return QKV_POOLING_LAST;
  if (v == "rank") return QKV_POOLING_RANK;
  fail("flag --pooling wants none, mean, cls, last or rank, not '", s, "'");
}

// llama.cpp's escapes: \n \r \t \' \" \\ and \xHH; any other backslash stays.
std::string process_escapes(const std::string& in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\\' || i + 1 >= in.size()) {
      out += in[i];
      continue;
    }
    const char c = in[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      default:
        if (c == 'x' && i + 2 < in.size() && std::isxdigit(static_cast<unsigned char>(in[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(in[i + 2]))) {
          out += static_cast<char>(std::strtol(in.substr(i + 1, 2).c_str(), nullptr, 16));
          i += 2;
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

// s cut at every separator, empty parts kept (llama-embedding's split_lines).
std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t end; (end = s.find(sep, start)) != std::string::npos; start = end + sep.size()) {
    parts.push_back(s.substr(start, end - start));
  }
  parts.push_back(s.substr(start));
  return parts;
}

// Returns -1 to continue or an exit code.
int parse(int argc, char** argv, Options* o) {
  bool only_positional = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (only_positional || a.empty() || a[0] != '-' || a == "-") {
      o->texts.push_back(a);
    } else if (a == "--") {
      only_positional = true;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "-m" || a == "--model") {
      o->model = models::resolve_model_argument(flag_value(argc, argv, i));
    } else if (a == "-p" || a == "--prompt") {
      o->prompt = flag_value(argc, argv, i);
      o->have_prompt = true;
    } else if (a == "-f" || a == "--file") {
      o->file = flag_value(argc, argv, i);
    } else if (a == "--no-escape") {
      o->escape = false;
    } else if (a == "--pooling") {
      o->pooling = parse_pooling(flag_value(argc, argv, i));
    } else if (a == "--embd-normalize") {
      o->normalize = static_cast<int>(parse_int("--embd-normalize", flag_value(argc, argv, i), -1, 1000));
    } else if (a == "--embd-separator") {
      o->separator = flag_value(argc, argv, i);
      if (o->separator.empty()) fail("flag --embd-separator wants a non-empty separator");
    } else if (a == "--embd-output-format") {
      o->format = flag_value(argc, argv, i);
      if (o->format != "" && o->format != "array" && o->format != "json" && o->format != "json+") {
        fail("flag --embd-output-format wants '', array, json or json+, not '", o->format, "'");
      }
    } else if (a == "--json") {
      o->format = "json";
    } else if (a == "--dimensions") {
      o->dimensions = parse_int("--dimensions", flag_value(argc, argv, i), 1, INT64_MAX);
    } else if (a == "--truncate") {
      o->truncate = true;
    } else if (a == "-t" || a == "--threads") {
      o->threads = static_cast<int>(parse_int("--threads", flag_value(argc, argv, i), 1, 4096));
    } else if (a == "-b" || a == "--batch-size") {
      o->batch = parse_int("--batch-size", flag_value(argc, argv, i), 1, INT64_C(1) << 24);
    } else {
      std::fprintf(stderr, "qkv embed: unknown flag '%s'\n\n%s", argv[i], kUsage);
      return 2;
    }
  }
  if (o->model.empty()) {
    std::fprintf(stderr, "qkv embed: -m MODEL is required\n\n%s", kUsage);
    return 2;
  }
  const int sources = (o->have_prompt ? 1 : 0) + (o->file.empty() ? 0 : 1) + (o->texts.empty() ? 0 : 1);
  if (sources != 1) {
    std::fprintf(stderr, "qkv embed: give the inputs one way: -p TEXT, -f FILE or TEXT arguments\n\n%s", kUsage);
    return 2;
  }
  return -1;
}

std::vector<std::string> inputs_of(const Options& o) {
  if (!o.texts.empty()) return o.texts;
  std::string text = o.prompt;
  if (!o.file.empty()) {
    text = o.file == "-" ? std::string(std::istreambuf_iterator<char>(std::cin), {}) : read_file(o.file);
    if (!text.empty() && text.back() == '\n') text.pop_back();
  }
  if (o.escape) text = process_escapes(text);
  return split(text, o.separator);
}

// llama.cpp's common_embd_similarity_cos: two zero vectors are alike (1), one is unlike anything (0).
float cosine(const float* a, const float* b, int64_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < n; ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  if (aa == 0.0 || bb == 0.0) return aa == 0.0 && bb == 0.0 ? 1.0f : 0.0f;
  return static_cast<float>(ab / (std::sqrt(aa) * std::sqrt(bb)));
}

void print_listing(const std::vector<std::string>& texts, const std::vector<float>& emb, int64_t count, int64_t width,
                   int pooling, int normalize) {
  const char* value_format = normalize == 0 ? "%6.0f " : "%9.6f ";
  const auto n_texts = static_cast<int64_t>(texts.size());
  std::printf("\n");
  if (pooling == QKV_POOLING_RANK) {
    for (int64_t j = 0; j < count; ++j) std::printf("rerank score %lld: %8.3f\n", static_cast<long long>(j), emb[j]);
    return;
  }
  if (pooling == QKV_POOLING_NONE) {  // each token: its first and last three values
    for (int64_t j = 0; j < count; ++j) {
      std::printf("embedding %lld: ", static_cast<long long>(j));
      const float* v = &emb[j * width];
      if (width <= 6) {
        for (int64_t i = 0; i < width; ++i) std::printf(value_format, v[i]);
      } else {
        for (int64_t i = 0; i < 3; ++i) std::printf(value_format, v[i]);
        std::printf(" ... ");
        for (int64_t i = width - 3; i < width; ++i) std::printf(value_format, v[i]);
      }
      std::printf("\n");
    }
    return;
  }
  for (int64_t j = 0; j < count; ++j) {  // one text: all values; several: the first 16 of each
    std::printf("embedding %lld: ", static_cast<long long>(j));
    const int64_t shown = n_texts > 1 ? std::min<int64_t>(16, width) : width;
    for (int64_t i = 0; i < shown; ++i) std::printf(value_format, emb[j * width + i]);
    std::printf("\n");
  }
  if (n_texts > 1) {
    std::printf("\ncosine similarity matrix:\n\n");
    for (const std::string& t : texts) std::printf("%6.6s ", t.c_str());
    std::printf("\n");
    for (int64_t i = 0; i < n_texts; ++i) {
      for (int64_t j = 0; j < n_texts; ++j) std::printf("%6.2f ", cosine(&emb[i * width], &emb[j * width], width));
      std::printf("%1.10s\n", texts[i].c_str());
    }
  }
}

void print_json(const std::string& format, int64_t n_texts, const std::vector<float>& emb, int64_t count, int64_t width,
                int normalize) {
  const bool object = format != "array";
  const char* value_format = normalize == 0 ? "%1.0f" : "%1.7f";
  std::printf(object ? "{\n  \"object\": \"list\",\n  \"data\": [\n" : "[");
  for (int64_t j = 0; j < count; ++j) {
    if (object) {
      std::printf("    {\n      \"object\": \"embedding\",\n      \"index\": %lld,\n      \"embedding\": ",
                  static_cast<long long>(j));
    }
    std::printf("[");
    for (int64_t i = 0; i < width; ++i) {
      std::printf(value_format, emb[j * width + i]);
      if (i + 1 < width) std::printf(",");
    }
    std::printf(object ? "]\n    }" : "]");
    if (j + 1 < count) std::printf(object ? ",\n" : ",");
  }
  std::printf(object ? "\n  ]" : "]\n");
  if (format == "json+" && n_texts > 1) {
    std::printf(",\n  \"cosineSimilarity\": [\n");
    for (int64_t i = 0; i < count; ++i) {
      std::printf("    [");
      for (int64_t j = 0; j < count; ++j) {
        std::printf("%6.2f", cosine(&emb[i * width], &emb[j * width], width));
        if (j + 1 < count) std::printf(", ");
      }
      std::printf(" ]");
      if (i + 1 < count) std::printf(",\n");
    }
    std::printf("\n  ]");
  }
  if (object) std::printf("\n}\n");
}

struct ModelDeleter {
  void operator()(qkv_model* m) const { qkv_model_free(m); }
};

}  // namespace

int cmd_embed(int argc, char** argv) {
  Options o;
  if (const int rc = parse(argc, argv, &o); rc >= 0) return rc;
  const std::vector<std::string> texts = inputs_of(o);

  qkv_model* raw = nullptr;
  check(qkv_model_load(o.model.c_str(), nullptr, &raw), "cannot load the model");
  const std::unique_ptr<qkv_model, ModelDeleter> model(raw);

  qkv_embed_options opts;
  qkv_embed_options_init(&opts);
  opts.pooling = static_cast<qkv_pooling>(o.pooling);
  opts.normalize = o.normalize;
  opts.dimensions = o.dimensions;
  opts.truncate = o.truncate ? 1 : 0;
  opts.batch_tokens = o.batch;
  opts.threads = batch_threads(o.threads);  // embedding is all prompt passes
  const int pooling = o.pooling == QKV_POOLING_DEFAULT ? qkv_model_pooling(model.get()) : o.pooling;
  int64_t width = 0;
  check(qkv_embed_dimension(model.get(), &opts, &width), "bad embedding options");

  std::vector<std::vector<int32_t>> ids(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    int64_t n = 0;
    const qkv_status st = qkv_embed_tokenize(model.get(), texts[i].c_str(), nullptr, 0, &n);
    if (st != QKV_ERR_BUFFER_TOO_SMALL) check(st, "cannot tokenize");
    ids[i].resize(static_cast<size_t>(n));
    check(qkv_embed_tokenize(model.get(), texts[i].c_str(), ids[i].data(), n, &n), "cannot tokenize");
  }
  std::vector<const int32_t*> tokens;
  std::vector<int64_t> counts;
  for (const std::vector<int32_t>& v : ids) {
    tokens.push_back(v.data());
    counts.push_back(static_cast<int64_t>(v.size()));
  }
  int64_t count = 0;
  const auto n_inputs = static_cast<int64_t>(texts.size());
  qkv_status st = qkv_embed(model.get(), tokens.data(), counts.data(), n_inputs, &opts, nullptr, 0, &count, nullptr);
  if (st != QKV_ERR_BUFFER_TOO_SMALL) check(st, "cannot embed");
  std::vector<float> emb(static_cast<size_t>(count * width));
  check(qkv_embed(model.get(), tokens.data(), counts.data(), n_inputs, &opts, emb.data(),
                  static_cast<int64_t>(emb.size()), &count, nullptr),
        "cannot embed");

  if (o.format.empty()) {
    print_listing(texts, emb, count, width, pooling, o.normalize);
  } else {
    print_json(o.format, n_inputs, emb, count, width, pooling == QKV_POOLING_RANK ? -1 : o.normalize);
  }
  return 0;
}

}  // namespace qkv::tools
