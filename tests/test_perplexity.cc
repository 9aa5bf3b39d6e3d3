// qkv_perplexity (runtime/perplexity.cc) against llama.cpp b4748's
// llama-perplexity: the shared tinystories-3M perplexities
// (../shared/reference/tinystories-3M-ppl.json) and KL-divergence base files
// (tinystories-3M-PRESET.kld). Presets whose weight types this build cannot
// load are skipped with a message; the full-text table of presets other than
// F32 runs with QKV_SLOW_TESTS=1 (each takes 15-30 s on a 2-core machine).
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "qkv.h"
#include "tests/shared_data.h"
#include "tools/args.h"
#include "tools/bench/bench_json.h"

namespace {

using qkv::test::have_shared;
using qkv::test::shared_path;

const char* kText = "reference/ppl-text.txt";
const char* kTable = "reference/tinystories-3M-ppl.json";

std::string model_path(const std::string& preset) { return shared_path("models/tinystories-3M-" + preset + ".gguf"); }

// The preset's model, or nullptr with a SKIPPED message when this build cannot load its weight types.
qkv_model* load_or_skip(const std::string& preset) {
  qkv_model* m = nullptr;
  const qkv_status st = qkv_model_load(model_path(preset).c_str(), nullptr, &m);
  if (st == QKV_ERR_FORMAT) {
    std::printf("SKIPPED: %s does not load in this build (%s)\n", preset.c_str(), qkv_last_error());
    return nullptr;
  }
  REQUIRE_MESSAGE(st == QKV_OK, qkv_last_error());
  return m;
}

qkv_perplexity_options f32_cache(int64_t n_ctx) {
  qkv_perplexity_options o;
  qkv_perplexity_options_init(&o);
  o.n_ctx = n_ctx;
  o.kv_type = QKV_TYPE_F32;  // the references were made with -ctk f32 -ctv f32
  o.threads = 2;
  return o;
}

qkv_perplexity_stats run(qkv_model* m, const std::string& text, const qkv_perplexity_options& o) {
  qkv_perplexity_stats s{};
  const qkv_status st = qkv_perplexity(m, text.empty() ? nullptr : text.c_str(), &o, nullptr, nullptr, &s);
  REQUIRE_MESSAGE(st == QKV_OK, qkv_last_error());
  return s;
}

// Full text, one preset and context, against llama.cpp's printed value and error.
void check_table_entry(const std::string& preset, int64_t n_ctx, const qkv::tools::Json& table) {
  const qkv::tools::Json& ref = table.at("ppl").at(preset).at("ctx" + std::to_string(n_ctx));
  const double want = ref.items()[0].as_number(), want_err = ref.items()[1].as_number();
  qkv_model* m = load_or_skip(preset);
  if (!m) return;
  const qkv_perplexity_stats s = run(m, qkv::tools::read_file(shared_path(kText)), f32_cache(n_ctx));
  qkv_model_free(m);
  std::printf("%s n_ctx %lld: PPL = %.4f +/- %.5f (llama.cpp %.4f +/- %.5f)\n", preset.c_str(),
              static_cast<long long>(n_ctx), s.ppl, s.ppl_err, want, want_err);
  const bool exact = preset == "F32" || preset == "F16";
  CHECK(std::fabs(s.ppl - want) / want < (exact ? 1e-3 : 5e-3));
  if (exact) {
    char got[32], ref4[32];
    std::snprintf(got, sizeof got, "%.4f", s.ppl);
    std::snprintf(ref4, sizeof ref4, "%.4f", want);
    CHECK(std::string(got) == std::string(ref4));
  }
  CHECK(std::fabs(s.ppl_err - want_err) / want_err < 1e-2);
}

}  // namespace

TEST_CASE("perplexity of F32 equals llama.cpp's to the printed digits at n_ctx 128 and 512") {
  if (!have_shared(kTable) || !have_shared(kText)) return;
  const auto table = qkv::tools::Json::parse(qkv::tools::read_file(shared_path(kTable)), kTable);
  check_table_entry("F32", 128, table);
  check_table_entry("F32", 512, table);
}

TEST_CASE("perplexity of every preset on the whole text (QKV_SLOW_TESTS=1)") {
  if (!have_shared(kTable) || !have_shared(kText)) return;
  const char* slow = std::getenv("QKV_SLOW_TESTS");
  if (!slow || std::strcmp(slow, "1") != 0) {
    std::printf("SKIPPED: the full-text table of every preset runs with QKV_SLOW_TESTS=1\n");
    return;
  }
  const auto table = qkv::tools::Json::parse(qkv::tools::read_file(shared_path(kTable)), kTable);
  for (const auto& [preset, _] : table.at("ppl").members()) {
    if (preset == "F32") continue;
    check_table_entry(preset, 128, table);
  }
}

TEST_CASE("every preset against its llama.cpp KL-divergence base file (20 chunks of 128)") {
  if (!have_shared(kTable)) return;
  const auto table = qkv::tools::Json::parse(qkv::tools::read_file(shared_path(kTable)), kTable);
  // Without QKV_SLOW_TESTS=1 a subset: the exact types, Q8_0 and one of each
  // K-quant and IQ4 family (the block types' scalar kernels take seconds each).
  const char* slow = std::getenv("QKV_SLOW_TESTS");
  const bool all = slow && std::strcmp(slow, "1") == 0;
  const std::set<std::string> quick = {"F32", "F16", "BF16", "Q8_0", "Q5_0", "Q4_K_M", "Q6_K", "IQ4_XS"};
  for (const auto& [preset, _] : table.at("ppl").members()) {
    if (!all && !quick.count(preset)) continue;
    const std::string base = "reference/tinystories-3M-" + preset + ".kld";
    if (!have_shared(base)) continue;
    qkv_model* m = load_or_skip(preset);
    if (!m) continue;
    const std::string base_path = shared_path(base);
    qkv_perplexity_options o = f32_cache(0);
    o.kl_divergence_read = base_path.c_str();
    const qkv_perplexity_stats s = run(m, "", o);
    qkv_model_free(m);
    std::printf("%-7s PPL %.4f (llama.cpp %.4f)  KLD %.3g +/- %.2g  same top %.2f%%  RMS dp %.4f%%\n",
                preset.c_str(), s.ppl, s.base_ppl, s.kld, s.kld_err, 100 * s.same_top, 100 * s.dp_rms);
    CHECK(s.has_kld == 1);
    CHECK(s.has_quantiles == 1);
    CHECK(s.n_chunks == 20);
    CHECK(s.scored_tokens == 20 * 63);
    const bool exact = preset == "F32" || preset == "F16" || preset == "BF16";
    CHECK(std::fabs(s.ppl - s.base_ppl) / s.base_ppl < (exact ? 1e-3 : 5e-3));
    if (preset == "F32") {
      CHECK(s.kld < 2e-5);
      CHECK(s.same_top >= 0.995);
    }
    // Quantiles are ordered from the maximum down to the minimum.
    for (int i = 1; i < QKV_EVAL_QUANTILES; ++i) {
      CHECK(s.kld_quantiles[i] <= s.kld_quantiles[i - 1]);
      CHECK(s.dp_quantiles[i] <= s.dp_quantiles[i - 1]);
    }
  }
}

TEST_CASE("perplexity is the same with 1 and 2 threads and any batch size") {
  if (!have_shared(kText) || !have_shared("models/tinystories-3M-F32.gguf")) return;
  qkv_model* m = load_or_skip("F32");
  REQUIRE(m);
  const std::string text = qkv::tools::read_file(shared_path(kText));
  qkv_perplexity_options o = f32_cache(128);
  o.chunks = 4;
  const qkv_perplexity_stats ref = run(m, text, o);
  CHECK(ref.n_chunks == 4);
  const struct {
    int threads;
    int64_t batch;
  } cases[] = {{1, 0}, {2, 0}, {1, 7}, {2, 16}, {2, 17}, {1, 64}, {2, 100}, {2, 4096}};
  for (const auto& c : cases) {
    o.threads = c.threads;
    o.batch = c.batch;
    const qkv_perplexity_stats s = run(m, text, o);
    INFO("threads ", c.threads, " batch ", c.batch);
    CHECK(std::fabs(s.ppl - ref.ppl) <= 1e-6 * ref.ppl);
    CHECK(std::fabs(s.ppl_err - ref.ppl_err) <= 1e-6 * ref.ppl_err);
  }
  qkv_model_free(m);
}

TEST_CASE("a text shorter than 2 x n_ctx tokens is a clear error") {
  if (!have_shared("models/tinystories-3M-F32.gguf")) return;
  qkv_model* m = load_or_skip("F32");
  REQUIRE(m);
  qkv_perplexity_options o = f32_cache(128);
  qkv_perplexity_stats s{};
  CHECK(qkv_perplexity(m, "Once upon a time there was a cat.", &o, nullptr, nullptr, &s) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(std::string(qkv_last_error()).find("at least 2 * n_ctx = 256 tokens") != std::string::npos);
  CHECK(qkv_perplexity(m, nullptr, &o, nullptr, nullptr, &s) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_perplexity(nullptr, "x", &o, nullptr, nullptr, &s) == QKV_ERR_INVALID_ARGUMENT);
  o.n_ctx = -1;
  CHECK(qkv_perplexity(m, "x", &o, nullptr, nullptr, &s) == QKV_ERR_INVALID_ARGUMENT);
  qkv_model_free(m);
}

TEST_CASE("the running estimate reaches the callback after every chunk, and a nonzero return stops") {
  if (!have_shared(kText) || !have_shared("models/tinystories-3M-F32.gguf")) return;
  qkv_model* m = load_or_skip("F32");
  REQUIRE(m);
  const std::string text = qkv::tools::read_file(shared_path(kText));
  qkv_perplexity_options o = f32_cache(128);
  o.chunks = 5;
  struct Seen {
    int64_t calls = 0, last_chunk = 0;
  } seen;
  auto cb = [](const qkv_perplexity_stats* s, void* user) {
    auto* v = static_cast<Seen*>(user);
    ++v->calls;
    v->last_chunk = s->chunk;
    return s->chunk == 3 ? 1 : 0;
  };
  qkv_perplexity_stats s{};
  REQUIRE(qkv_perplexity(m, text.c_str(), &o, cb, &seen, &s) == QKV_OK);
  CHECK(seen.calls == 3);
  CHECK(s.n_chunks == 3);
  CHECK(s.scored_tokens == 3 * 63);
  qkv_model_free(m);
}

TEST_CASE("a base file qkv writes has llama.cpp's layout: header, tokens and rows as the shared F32 file") {
  const std::string ref_rel = "reference/tinystories-3M-F32.kld";
  if (!have_shared(ref_rel) || !have_shared(kText)) return;
  qkv_model* m = load_or_skip("F32");
  REQUIRE(m);
  const std::string out = std::string(QKV_BINARY_DIR) + "/test_perplexity." + std::to_string(::getpid()) + ".kld";
  qkv_perplexity_options o = f32_cache(128);
  o.chunks = 20;
  o.kl_divergence_write = out.c_str();
  run(m, qkv::tools::read_file(shared_path(kText)), o);
  qkv_model_free(m);
  const std::string a = qkv::tools::read_file(out), b = qkv::tools::read_file(shared_path(ref_rel));
  ::unlink(out.c_str());
  REQUIRE(a.size() == b.size());
  const size_t tokens_end = 20 + 4 * 20 * 128;
  CHECK(a.compare(0, tokens_end, b, 0, tokens_end) == 0);  // "_logits_", n_ctx, n_vocab, n_chunk, tokens
  const size_t row_bytes = (2 * ((512 + 1) / 2) + 4) * 2;
  REQUIRE((a.size() - tokens_end) % row_bytes == 0);
  double worst = 0;
  for (size_t off = tokens_end; off < a.size(); off += row_bytes) {
    float sa[2], sb[2];
    std::memcpy(sa, a.data() + off, 8);
    std::memcpy(sb, b.data() + off, 8);
    CHECK(std::fabs(sa[0] - sb[0]) <= 1e-3 * sb[0]);
    CHECK(std::fabs(sa[1] - sb[1]) <= 1e-3);
    for (size_t i = 0; i < 512; ++i) {
      uint16_t qa, qb;
      std::memcpy(&qa, a.data() + off + 8 + 2 * i, 2);
      std::memcpy(&qb, b.data() + off + 8 + 2 * i, 2);
      if (qa == 0 || qb == 0) continue;  // at the floor in one of them
      worst = std::max(worst, std::fabs(static_cast<double>(sa[1] + sa[0] * qa) - (sb[1] + sb[0] * qb)));
    }
  }
  std::printf("largest log-probability difference from llama.cpp's F32 base file: %.2e\n", worst);
  CHECK(worst < 2e-3);
}
