// qkv attention: heatmaps of a real model's attention weights on a prompt
// (SVG, one panel per head, GQA groups marked) and the matrices as JSON.
// A client of the public C API.
#include <cstdio>
#include <string>
#include <vector>

#include "qkv.h"
#include "runtime/atomic_file.h"
#include "tools/args.h"
#include "tools/inspect/attention_svg.h"
#include "tools/commands.h"

namespace qkv::tools {

namespace {

const char* kAttentionUsage =
    "usage: qkv attention -m MODEL -p TEXT [--layer L|all] [--head H|all] [-o map.svg] [--json]\n"
    "  -m, --model PATH      GGUF file or llama2.c checkpoint\n"
    "  -z, --tokenizer PATH  llama2.c tokenizer.bin (needed for llama2.c checkpoints)\n"
    "  -p, --prompt TEXT     the prompt (BOS is put first)\n"
    "  --layer L|all         layer (default 0)\n"
    "  --head H|all          query head (default all)\n"
    "  -o, --output PATH     write the heatmaps as SVG\n"
    "  --json                print the tokens and weight matrices as JSON\n"
    "  -t, --threads N       threads (default: one per physical core)\n";

// -1 for "all", else a number in [0, n).
int64_t parse_choice(const char* flag, const std::string& s, int64_t n) {
  if (s == "all") return -1;
  return parse_int(flag, s.c_str(), 0, n - 1);
}

std::string piece_of(const qkv_model* m, int32_t id) {
  int64_t len = 0;
  qkv_vocab_piece(m, id, nullptr, 0, &len);
  std::string s(static_cast<size_t>(len) + 1, '\0');
  check(qkv_vocab_piece(m, id, s.data(), len + 1, &len), "token piece");
  s.resize(static_cast<size_t>(len));
  return s;
}

}  // namespace

int cmd_attention(int argc, char** argv) {
  std::string model_path, tokenizer_path, prompt, out_path, layer_arg = "0", head_arg = "all";
  bool json = false, have_prompt = false;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kAttentionUsage, stdout);
      return 0;
    } else if (a == "-m" || a == "--model") {
      model_path = flag_value(argc, argv, i);
    } else if (a == "-z" || a == "--tokenizer") {
      tokenizer_path = flag_value(argc, argv, i);
    } else if (a == "-p" || a == "--prompt") {
      prompt = flag_value(argc, argv, i);
      have_prompt = true;
    } else if (a == "--layer") {
      layer_arg = flag_value(argc, argv, i);
    } else if (a == "--head") {
      head_arg = flag_value(argc, argv, i);
    } else if (a == "-o" || a == "--output") {
      out_path = flag_value(argc, argv, i);
    } else if (a == "--json") {
      json = true;
    } else if (a == "-t" || a == "--threads") {
      threads = static_cast<int>(parse_int(a.c_str(), flag_value(argc, argv, i), 1, 1024));
    } else {
      std::fprintf(stderr, "qkv attention: unknown flag '%s'\n\n%s", argv[i], kAttentionUsage);
      return 2;
    }
  }
  if (model_path.empty() || !have_prompt || (out_path.empty() && !json)) {
    std::fprintf(stderr, "qkv attention: -m MODEL, -p TEXT and -o FILE.svg or --json are required\n\n%s",
                 kAttentionUsage);
    return 2;
  }
  qkv_model_options mopts;
  qkv_model_options_init(&mopts);
  if (!tokenizer_path.empty()) mopts.tokenizer_path = tokenizer_path.c_str();
  qkv_model* model = nullptr;
  check(qkv_model_load(model_path.c_str(), &mopts, &model), "loading the model");
  struct Free {
    qkv_model* m;
    ~Free() { qkv_model_free(m); }
  } free_model{model};
  qkv_model_info info;
  check(qkv_model_get_info(model, &info), "model info");
  const int64_t layer = parse_choice("--layer", layer_arg, info.n_layers);
  const int64_t head = parse_choice("--head", head_arg, info.n_heads);

  int64_t n = 0;
  qkv_tokenize(model, prompt.c_str(), 1, nullptr, 0, &n);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  check(qkv_tokenize(model, prompt.c_str(), 1, ids.data(), n, &n), "tokenizing");
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(piece_of(model, id));

  const int64_t group = info.n_heads / info.n_kv_heads;
  std::vector<HeatmapPanel> panels;
  for (int64_t l = layer < 0 ? 0 : layer; l < (layer < 0 ? info.n_layers : layer + 1); ++l) {
    int64_t needed = 0;
    qkv_attention_map(model, ids.data(), n, l, -1, threads, nullptr, 0, &needed);
    std::vector<float> w(static_cast<size_t>(needed));
    check(qkv_attention_map(model, ids.data(), n, l, -1, threads, w.data(), needed, &needed), "attention map");
    for (int64_t h = head < 0 ? 0 : head; h < (head < 0 ? info.n_heads : head + 1); ++h) {
      HeatmapPanel p;
      p.layer = l;
      p.head = h;
      p.kv_head = h / group;
      p.weights.assign(w.begin() + h * n * n, w.begin() + (h + 1) * n * n);
      panels.push_back(std::move(p));
    }
  }
  if (!out_path.empty()) {
    const std::string title = "attention of " + model_path.substr(model_path.find_last_of('/') + 1) + ", " +
                              std::to_string(n) + " tokens";
    const std::string svg =
        render_attention_svg(title, pieces, panels, head < 0 ? info.n_heads : 1, head < 0 ? group : 1);
    write_file_atomically(out_path, svg);
  }
  if (json) {
    std::printf("{\"model\": \"%s\", \"n_heads\": %lld, \"n_kv_heads\": %lld, \"ids\": [", json_escape(model_path).c_str(),
                static_cast<long long>(info.n_heads), static_cast<long long>(info.n_kv_heads));
    for (int64_t i = 0; i < n; ++i) std::printf("%s%d", i ? ", " : "", ids[i]);
    std::printf("], \"pieces\": [");
    for (int64_t i = 0; i < n; ++i) std::printf("%s\"%s\"", i ? ", " : "", json_escape(pieces[i]).c_str());
    std::printf("], \"maps\": [");
    for (size_t p = 0; p < panels.size(); ++p) {
      std::printf("%s\n {\"layer\": %lld, \"head\": %lld, \"kv_head\": %lld, \"weights\": [", p ? "," : "",
                  static_cast<long long>(panels[p].layer), static_cast<long long>(panels[p].head),
                  static_cast<long long>(panels[p].kv_head));
      for (int64_t i = 0; i < n; ++i) {
        std::printf("%s[", i ? ", " : "");
        for (int64_t j = 0; j < n; ++j) std::printf("%s%.9g", j ? ", " : "", panels[p].weights[i * n + j]);
        std::printf("]");
      }
      std::printf("]}");
    }
    std::printf("\n]}\n");
  }
  return 0;
}

}  // namespace qkv::tools
