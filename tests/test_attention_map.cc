// Attention maps (runtime/attention_map.h, qkv_attention_map): on stories260K
// (8 query heads, 4 KV heads) every row sums to 1, nothing above the diagonal,
// and the weights equal the scalar reference's on the same rotated queries and
// cached keys; the C API's buffer and argument checks.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "qkv.h"
#include "runtime/attention_map.h"
#include "runtime/decoder.h"
#include "runtime/model_loader.h"
#include "runtime/tokenizer.h"
#include "tests/shared_data.h"

namespace {

const char* kModel = "models/stories260K.gguf";
const char* kPrompt = "Once upon a time, there was a little girl named Lily. She liked to play";

}  // namespace

TEST_CASE("every layer's map: rows sum to 1, causal, equal to the reference kernel") {
  if (!qkv::test::have_shared(kModel)) return;
  const std::string path = qkv::test::shared_path(kModel);
  const qkv::Model model = qkv::load_model(path);
  const qkv::Tokenizer tok = qkv::Tokenizer::from_gguf(qkv::GGUFFile::open(path));
  const std::vector<int32_t> ids = tok.encode(kPrompt, true, false);
  const auto n = static_cast<int64_t>(ids.size());
  REQUIRE(n > 10);
  const qkv::ModelConfig& c = model.config;
  for (int64_t layer = 0; layer < c.n_layers; ++layer) {
    CAPTURE(layer);
    // The same run as attention_map, keeping the decoder so its cache gives the keys.
    qkv::DecoderOptions o;
    o.context = n;
    o.kv_type = qkv::DType::F32;
    o.prefill_batch = n;
    qkv::Decoder dec(model, o);
    qkv::AttentionCapture cap;
    cap.layer = layer;
    dec.set_attention_capture(&cap);
    dec.prefill(0, ids.data(), n);
    REQUIRE(cap.rows == n);

    const qkv::AttentionMap m = qkv::attention_map(model, ids.data(), n, layer);
    REQUIRE(m.weights.size() == static_cast<size_t>(c.n_heads * n * n));
    CHECK(m.weights == cap.weights);  // deterministic: the same run gives the same bits

    qkv::AttentionShape shape{1, c.n_heads, c.n_kv_heads, n, n, c.head_dim};
    qkv::QueryView q{cap.queries.data(), 0, c.head_dim, c.dim};
    std::vector<float> out(static_cast<size_t>(n * c.dim)), ref_w(m.weights.size());
    qkv::OutputView ov{out.data(), 0, c.head_dim, c.dim};
    qkv::AttentionMask mask;
    mask.causal = true;
    qkv::AttentionOptions opts;
    opts.weights = ref_w.data();
    qkv::attention_reference(shape, q, dec.cache().keys(layer), dec.cache().values(layer), mask, ov, opts);

    double worst = 0;
    for (int64_t h = 0; h < c.n_heads; ++h) {
      for (int64_t i = 0; i < n; ++i) {
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          const size_t at = static_cast<size_t>((h * n + i) * n + j);
          const float w = m.weights[at];
          if (j > i) CHECK(w == 0.0f);
          CHECK(w >= 0.0f);
          sum += w;
          worst = std::max(worst, std::fabs(static_cast<double>(w) - ref_w[at]));
        }
        CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
      }
    }
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("qkv_attention_map: one head or all, sizes, and bad arguments") {
  if (!qkv::test::have_shared(kModel)) return;
  qkv_model* m = nullptr;
  REQUIRE(qkv_model_load(qkv::test::shared_path(kModel).c_str(), nullptr, &m) == QKV_OK);
  int64_t n = 0;
  qkv_tokenize(m, kPrompt, 1, nullptr, 0, &n);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  REQUIRE(qkv_tokenize(m, kPrompt, 1, ids.data(), n, &n) == QKV_OK);
  int64_t needed = 0;
  CHECK(qkv_attention_map(m, ids.data(), n, 2, -1, 1, nullptr, 0, &needed) == QKV_ERR_BUFFER_TOO_SMALL);
  CHECK(needed == 8 * n * n);
  std::vector<float> all(static_cast<size_t>(needed)), one(static_cast<size_t>(n * n));
  REQUIRE(qkv_attention_map(m, ids.data(), n, 2, -1, 2, all.data(), needed, &needed) == QKV_OK);
  REQUIRE(qkv_attention_map(m, ids.data(), n, 2, 5, 1, one.data(), n * n, &needed) == QKV_OK);
  CHECK(needed == n * n);
  for (int64_t i = 0; i < n * n; ++i) CHECK(std::fabs(all[5 * n * n + i] - one[i]) < 1e-6);  // 1 and 2 threads
  CHECK(qkv_attention_map(m, ids.data(), n, 5, -1, 1, all.data(), needed, &needed) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(std::string(qkv_last_error()).find("layer 5 does not exist") != std::string::npos);
  CHECK(qkv_attention_map(m, ids.data(), n, 0, 8, 1, all.data(), needed, &needed) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_attention_map(m, ids.data(), 0, 0, -1, 1, all.data(), needed, &needed) == QKV_ERR_INVALID_ARGUMENT);
  const int32_t bad = 9999;
  CHECK(qkv_attention_map(m, &bad, 1, 0, -1, 1, all.data(), needed, &needed) == QKV_ERR_INVALID_ARGUMENT);
  // One token attends to itself alone.
  float w1[8];
  REQUIRE(qkv_attention_map(m, ids.data(), 1, 0, -1, 1, w1, 8, &needed) == QKV_OK);
  for (float w : w1) CHECK(w == 1.0f);
  char piece[32];
  int64_t len = 0;
  REQUIRE(qkv_vocab_piece(m, ids[1], piece, sizeof piece, &len) == QKV_OK);
  CHECK(std::string(piece) == "\xE2\x96\x81Once");
  CHECK(qkv_vocab_piece(m, 1, piece, 2, &len) == QKV_ERR_BUFFER_TOO_SMALL);
  CHECK(len == 3);  // "<s>"
  qkv_model_free(m);
}
