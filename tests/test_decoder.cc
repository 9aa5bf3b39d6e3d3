// ctest-labels: decoder
// The decoder's forward pass against a scalar fp64 forward pass on the same
// stored weights, and its invariants: prefill == token-by-token, 1 thread == 2
// threads, batched steps == single steps, .bin == .gguf for stories260K.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/error.h"
#include "kernels/linear_internal.h"
#include "runtime/decoder.h"
#include "tests/decoder_fixture.h"
#include "runtime/model_loader.h"
#include "runtime/synthetic.h"
#include "tests/reference_forward.h"
#include "tests/shared_data.h"

using namespace qkv;
using qkv::testing::small_gqa_config;

namespace {

// A GQA model small enough for an fp64 reference: 8 query heads on 2 KV heads,
std::vector<int32_t> some_tokens(int n, int vocab, int salt = 0) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 37 + 11 + salt * 101) % vocab;
  return t;
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::fabs(v));
  return m;
}

// Largest |a - b| relative to the reference's largest logit.
double rel_error(const float* got, const std::vector<double>& want) {
  double e = 0;
  for (size_t i = 0; i < want.size(); ++i) e = std::max(e, std::fabs(got[i] - want[i]));
  return e / std::max(max_abs(want), 1e-30);
}

// Relative logit error allowed per weight type (relative to the largest
// logit). F32, F16 and BF16 weights are widened exactly to f32 and multiply f32
// activations, so only the f32 summation order differs from the fp64
// reference (measured: ~1e-6). Q8_0 multiplies int8-quantized activations
// (per 32-block, rounding error up to 1/254 of the block maximum): 7 quantized
// inputs per layer over 3 layers plus the classifier is about 16 such
// roundings in the worst case (measured: 0.033).
double tolerance(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return 1e-4;
    case DType::Q8_0: return 16.0 / 254;
    default: break;  // the suite's models are F32/F16/BF16/Q8_0
  }
  qkv::fail("test_decoder: no tolerance for ", qkv::dtype_name(t));
}

// The batched path (prefill, batched steps) multiplies non-F32 weights through
// bf16 GEMMs where the CPU has AVX512_BF16 (kernels/linear_internal.h): every
// input and weight rounded to bf16, each product within 2^-8 relative. Along
// the small model's longest chain of GEMMs (3 layers of QKV -> O and gate/up ->
// down, then the classifier: 13) that is at most about 13 * 2^-8 relative
// (measured: 0.007 for F16). Logits computed after such a prefill inherit its
// cached K/V, so they get the same allowance.
double batched_tolerance(DType t) {
  const bool bf16 = detail::matmul_small_precision(t) == detail::GemmPrecision::kBF16;
  return bf16 ? std::max(tolerance(t), 13 * 0x1p-8) : tolerance(t);
}

// small_gqa_config widened so that every matrix is split between the threads.
ModelConfig wide_gqa_config() {
  ModelConfig c = small_gqa_config();
  c.dim = 256;
  c.hidden_dim = 768;
  c.head_dim = 32;
  c.rope_dim = 32;
  c.context_length = 512;
  return c;
}

}  // namespace

TEST_CASE("decoder matches the scalar fp64 forward pass for every weight type") {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    CAPTURE(dtype_name(t));
    const Model model = make_synthetic_model(small_gqa_config(), t, 7, /*tied_output=*/false);
    DecoderOptions o;
    o.kv_type = DType::F32;  // the cache's rounding is tested in test_kv_cache
    Decoder dec(model, o);
    test::ReferenceForward ref(model);
    const std::vector<int32_t> tokens = some_tokens(24, 300);

    // A 16-token prompt through the batched path, then 8 single steps.
    std::vector<double> want;
    for (int i = 0; i < 16; ++i) want = ref.step(tokens[i]);
    const float* got = dec.prefill(0, tokens.data(), 16);
    CHECK(rel_error(got, want) <= batched_tolerance(t));
    for (int i = 16; i < 24; ++i) {
      want = ref.step(tokens[i]);
      got = dec.step(0, tokens[i]);
      CHECK(rel_error(got, want) <= batched_tolerance(t));
    }
    CHECK(dec.position(0) == 24);
  }
}

TEST_CASE("prefill then decode equals feeding the prompt one token at a time") {
  for (DType t : {DType::F32, DType::F16, DType::Q8_0}) {
    CAPTURE(dtype_name(t));
    const Model model = make_synthetic_model(small_gqa_config(), t, 3, false);
    const std::vector<int32_t> tokens = some_tokens(41, 300, 1);
    DecoderOptions o;
    o.kv_type = DType::F32;
    o.prefill_batch = 16;  // several batches: 16 + 16 + 7
    Decoder batched(model, o), single(model, o);
    const float* pl = batched.prefill(0, tokens.data(), 39);
    const std::vector<float> prefilled(pl, pl + 300);
    const float* sl = nullptr;
    for (int i = 0; i < 39; ++i) sl = single.step(0, tokens[i]);
    const std::vector<double> stepped(sl, sl + 300);
    CHECK(rel_error(prefilled.data(), stepped) <= batched_tolerance(t));
    // Both continue alike from their caches.
    for (int i = 39; i < 41; ++i) {
      const float* a = batched.step(0, tokens[i]);
      const std::vector<float> av(a, a + 300);
      const float* b = single.step(0, tokens[i]);
      CHECK(rel_error(av.data(), std::vector<double>(b, b + 300)) <= batched_tolerance(t));
    }
  }
}

TEST_CASE("a prefill large enough to split its per-row steps over threads equals stepping") {
  // 300 rows of dim 256: the norms, RoPE and activations run in parallel
  // regions of contiguous shares (each_share outside a team).
  const Model model = make_synthetic_model(wide_gqa_config(), DType::F32, 4, false);
  const std::vector<int32_t> tokens = some_tokens(300, 300, 3);
  DecoderOptions o;
  o.kv_type = DType::F32;
  o.prefill_batch = 300;
  Decoder batched(model, o), single(model, o);
  const float* pl = batched.prefill(0, tokens.data(), 300);
  const std::vector<float> prefilled(pl, pl + 300);
  const float* sl = nullptr;
  for (int i = 0; i < 300; ++i) sl = single.step(0, tokens[i]);
  CHECK(rel_error(prefilled.data(), std::vector<double>(sl, sl + 300)) <= batched_tolerance(DType::F32));
  // The cached K and V of every position agree too: the next step matches.
  const float* a = batched.step(0, 7);
  const std::vector<float> av(a, a + 300);
  const float* b = single.step(0, 7);
  CHECK(rel_error(av.data(), std::vector<double>(b, b + 300)) <= batched_tolerance(DType::F32));
}

TEST_CASE("one thread and two threads agree within rounding") {
  const Model model = make_synthetic_model(small_gqa_config(), DType::F16, 5, false);
  const std::vector<int32_t> tokens = some_tokens(30, 300, 2);
  std::vector<std::vector<float>> runs;
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    DecoderOptions o;
    o.kv_type = DType::F16;
    Decoder dec(model, o);
    const float* l = dec.prefill(0, tokens.data(), 20);
    std::vector<float> all(l, l + 300);
    for (int i = 20; i < 30; ++i) {
      l = dec.step(0, tokens[i]);
      all.insert(all.end(), l, l + 300);
    }
    runs.push_back(all);
  }
  omp_set_num_threads(omp_get_num_procs());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < runs[0].size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(runs[0][i] - runs[1][i])));
    scale = std::max(scale, static_cast<double>(std::fabs(runs[0][i])));
  }
  // Only the summation order may differ (split points of key ranges and rows).
  CHECK(worst <= 1e-4 * scale);
}

TEST_CASE("a batched step equals stepping each sequence alone") {
  const Model model = make_synthetic_model(small_gqa_config(), DType::F16, 9, false);
  DecoderOptions o;
  o.kv_type = DType::F16;
  o.n_seqs = 3;
  Decoder batch(model, o);
  DecoderOptions o1 = o;
  o1.n_seqs = 1;
  std::vector<std::unique_ptr<Decoder>> alone;
  // Three sequences of different lengths.
  const int lens[3] = {5, 17, 9};
  for (int s = 0; s < 3; ++s) {
    const std::vector<int32_t> prompt = some_tokens(lens[s], 300, 10 + s);
    batch.prefill(s, prompt.data(), lens[s]);
    alone.push_back(std::make_unique<Decoder>(model, o1));
    alone.back()->prefill(0, prompt.data(), lens[s]);
  }
  for (int step = 0; step < 4; ++step) {
    const int64_t seqs[3] = {2, 0, 1};  // any order
    const int32_t toks[3] = {int32_t(40 + step), int32_t(50 + step), int32_t(60 + step)};
    const float* l = batch.step_batch(seqs, toks, 3);
    const std::vector<float> together(l, l + 3 * 300);
    for (int i = 0; i < 3; ++i) {
      const float* a = alone[seqs[i]]->step(0, toks[i]);
      CHECK(rel_error(&together[i * 300], std::vector<double>(a, a + 300)) <= batched_tolerance(DType::F16));
    }
  }
  for (int s = 0; s < 3; ++s) CHECK(batch.position(s) == lens[s] + 4);
}

TEST_CASE("a decode step in one team equals a region per kernel call, bit for bit") {
  // Wide enough that every matrix is split between the threads.
  const ModelConfig c = wide_gqa_config();
  omp_set_num_threads(2);
  // (the block types' batches with their inputs quantized ahead in the team)
  for (DType t : {DType::F16, DType::Q8_0, DType::Q5_0, DType::Q4_K}) {
    CAPTURE(dtype_name(t));
    const Model model = make_synthetic_model(c, t, 21, false);
    std::vector<std::vector<float>> runs;
    for (bool team : {true, false}) {
      DecoderOptions o;
      o.kv_type = DType::F16;
      o.n_seqs = 4;
      o.decode_team = team;
      Decoder dec(model, o);
      std::vector<float> all;
      for (int s = 0; s < 4; ++s) {
        const std::vector<int32_t> prompt = some_tokens(20 + 9 * s, 300, s);
        dec.prefill(s, prompt.data(), static_cast<int64_t>(prompt.size()));
      }
      for (int step = 0; step < 5; ++step) {
        const float* l = dec.step(1, int32_t(70 + step));  // one sequence
        all.insert(all.end(), l, l + 300);
        const int64_t seqs[4] = {3, 0, 2, 1};
        const int32_t toks[4] = {int32_t(1 + step), int32_t(2 + step), int32_t(3 + step), int32_t(4 + step)};
        l = dec.step_batch(seqs, toks, 4);  // a batch
        all.insert(all.end(), l, l + 4 * 300);
      }
      runs.push_back(all);
    }
    REQUIRE(runs[0].size() == runs[1].size());
    CHECK(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * sizeof(float)) == 0);
  }
  omp_set_num_threads(omp_get_num_procs());
}

TEST_CASE("bad requests are clear errors") {
  const Model model = make_synthetic_model(small_gqa_config(), DType::F32, 1, false);
  DecoderOptions o;
  o.context = 8;
  Decoder dec(model, o);
  const std::vector<int32_t> tokens = some_tokens(9, 300);
  CHECK_THROWS_WITH(dec.prefill(0, tokens.data(), 9), doctest::Contains("context overflow"));
  const int32_t bad = 300;
  CHECK_THROWS_WITH(dec.prefill(0, &bad, 1), doctest::Contains("outside the vocabulary"));
  dec.prefill(0, tokens.data(), 8);
  CHECK_THROWS_WITH(dec.step(0, 1), doctest::Contains("context overflow"));
  CHECK_THROWS_WITH(dec.step(1, 1), doctest::Contains("sequence"));
  const int64_t twice[2] = {0, 0};
  const int32_t toks[2] = {1, 2};
  DecoderOptions o2;
  o2.n_seqs = 2;
  Decoder dec2(model, o2);
  CHECK_THROWS_WITH(dec2.step_batch(twice, toks, 2), doctest::Contains("appears twice"));
}

TEST_CASE("stories260K: the .bin and the .gguf give identical logits") {
  if (!test::have_shared("models/stories260K.bin") || !test::have_shared("models/stories260K.gguf")) return;
  const Model a = load_model(test::shared_path("models/stories260K.bin"));
  const Model b = load_model(test::shared_path("models/stories260K.gguf"));
  DecoderOptions o;
  Decoder da(a, o), db(b, o);
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  const float* la = da.prefill(0, prompt.data(), 5);
  const std::vector<float> va(la, la + 512);
  const float* lb = db.prefill(0, prompt.data(), 5);
  CHECK(std::equal(va.begin(), va.end(), lb));
  for (int32_t t : {300, 301, 302}) {
    const float* sa = da.step(0, t);
    const std::vector<float> vsa(sa, sa + 512);
    const float* sb = db.step(0, t);
    CHECK(std::equal(vsa.begin(), vsa.end(), sb));
  }
}

TEST_CASE("stories260K matches the fp64 reference forward pass") {
  if (!test::have_shared("models/stories260K.bin")) return;
  const Model m = load_model(test::shared_path("models/stories260K.bin"));
  DecoderOptions o;
  o.kv_type = DType::F32;
  Decoder dec(m, o);
  test::ReferenceForward ref(m);
  for (int32_t t : {1, 403, 407, 261, 378, 290}) {
    const std::vector<double> want = ref.step(t);
    CHECK(rel_error(dec.step(0, t), want) <= tolerance(DType::F32));
  }
}

TEST_CASE("row groups: a Q4_0 file's logits as in rows, its given-back pages out of reach") {
  const std::string path = test::shared_path("models/tinystories-3M-Q4_0.gguf");
  if (!test::have_shared("models/tinystories-3M-Q4_0.gguf")) return;
  const Model rows = load_model(path);
  Model groups = load_model(path);
  if (lay_out_weights(groups) == 0) {
    MESSAGE("SKIPPED: this CPU runs no row-group kernels");
    return;
  }
  CHECK(groups.layers[0].wq.row_groups);
  DecoderOptions o;
  o.kv_type = DType::F32;
  Decoder dr(rows, o), dg(groups, o);
  const int64_t vocab = rows.config.vocab_size;
  for (int32_t t : {1, 403, 407, 261, 378, 290}) {
    const float* lr = dr.step(0, t);
    const std::vector<double> want(lr, lr + vocab);
    // The group kernels sum in another f32 order than the row kernels.
    CHECK(rel_error(dg.step(0, t), want) <= 1e-4);
  }
  // The matrices' pages of the file mapping are given back into an
  // inaccessible mapping of their own (/proc/self/maps "---p"), so that the
  // kernel cannot map them again beside the norm weights.
  const auto lo = reinterpret_cast<uintptr_t>(groups.file_mapping), hi = lo + groups.file_mapping_bytes;
  FILE* maps = std::fopen("/proc/self/maps", "r");
  REQUIRE(maps != nullptr);
  uint64_t protected_bytes = 0;
  char line[512];
  while (std::fgets(line, sizeof line, maps)) {
    uintptr_t a = 0, b = 0;
    char perms[8] = {};
    if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s", &a, &b, perms) == 3 && a >= lo && b <= hi &&
        std::strcmp(perms, "---p") == 0) {
      protected_bytes += b - a;
    }
  }
  std::fclose(maps);
  const Matrix& wq = groups.layers[0].wq;
  const uint64_t wq_bytes = uint64_t(wq.rows) * dtype_row_bytes(wq.type, size_t(wq.cols));
  CHECK(protected_bytes >= 4 * wq_bytes);
}

TEST_CASE("laid-out K-quant rows: copied out of the file mapping, the same logits bit for bit") {
  const std::string path = test::shared_path("models/tinystories-3M-Q4_K_M.gguf");
  if (!test::have_shared("models/tinystories-3M-Q4_K_M.gguf")) return;
  const Model mapped = load_model(path);
  Model copied = load_model(path);
  CHECK(lay_out_weights(copied) == 0);  // Q4_K and Q6_K: no row groups
  // Every quantized layer matrix and the output now lie outside the mapping.
  const auto lo = reinterpret_cast<uintptr_t>(copied.file_mapping), hi = lo + copied.file_mapping_bytes;
  int quantized = 0;
  auto outside = [&](const Matrix& w) {
    const auto a = reinterpret_cast<uintptr_t>(w.data);
    return a + uint64_t(w.rows) * dtype_row_bytes(w.type, size_t(w.cols)) <= lo || a >= hi;
  };
  for (const LayerWeights& l : copied.layers) {
    for (const Matrix* w : layer_matrices(l)) {
      if (!dtype_is_quantized(w->type)) continue;
      ++quantized;
      CHECK(outside(*w));
      CHECK(!w->row_groups);
    }
  }
  CHECK(quantized >= 7 * static_cast<int>(copied.layers.size()));
  if (dtype_is_quantized(copied.output.type)) CHECK(outside(copied.output));
  DecoderOptions o;
  o.kv_type = DType::F32;
  Decoder dm(mapped, o), dc(copied, o);
  const int64_t vocab = mapped.config.vocab_size;
  for (int32_t t : {1, 403, 407, 261}) {
    const float* lm = dm.step(0, t);
    const std::vector<float> want(lm, lm + vocab);
    const float* lc = dc.step(0, t);
    CHECK(std::equal(want.begin(), want.end(), lc));
  }
}
