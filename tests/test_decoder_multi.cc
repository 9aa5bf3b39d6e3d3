// ctest-labels: decoder
// Decoder::prefill_multi against separate prefills of each sequence: the same
// logits (to GEMM rounding) and the same caches after, across pass splits,
// one-token runs, sequences already holding positions, and bad requests.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/error.h"
#include "kernels/linear_internal.h"
#include "runtime/decoder.h"
#include "runtime/synthetic.h"
#include "tests/decoder_fixture.h"

using namespace qkv;
using qkv::testing::rel_diff;
using qkv::testing::small_gqa_config;

namespace {

constexpr int kVocab = 300;

std::vector<int32_t> some_tokens(int64_t n, int salt) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 37 + 11 + salt * 101) % kVocab);
  return t;
}

// F32 weights and cache: only the f32 summation order differs. Other weights
// may go through bf16 GEMMs on one side and not the other (the small-batch
// kernels for a short separate prefill, oneDNN for the packed rows): the
// batched allowance of test_decoder.cc (13 bf16 roundings along the chain).
double tolerance(DType t) {
  if (t == DType::F32) return 1e-5;
  const bool bf16 = detail::matmul_small_precision(t) == detail::GemmPrecision::kBF16 ||
                    detail::default_gemm_precision(t) == detail::GemmPrecision::kBF16;
  return bf16 ? 13 * 0x1p-8 : 1e-4;
}

// Sequences seqs[i] get counts[i] prompt tokens through one prefill_multi in one
// decoder and through separate prefills in another (sequence 1 first holds 6
// tokens in both); then both step every sequence twice.
void check_against_separate(DType t, int64_t prefill_batch, const std::vector<int64_t>& counts) {
  CAPTURE(dtype_name(t));
  CAPTURE(prefill_batch);
  const Model model = make_synthetic_model(small_gqa_config(), t, 11, /*tied_output=*/false);
  DecoderOptions o;
  o.kv_type = t == DType::F32 ? DType::F32 : DType::F16;
  o.n_seqs = 4;
  o.prefill_batch = prefill_batch;
  Decoder multi(model, o), separate(model, o);
  const std::vector<int32_t> head = some_tokens(6, 9);
  multi.prefill(1, head.data(), 6);
  separate.prefill(1, head.data(), 6);

  const int64_t seqs[4] = {2, 1, 3, 0};
  const auto n = static_cast<int64_t>(counts.size());
  std::vector<std::vector<int32_t>> prompts;
  std::vector<const int32_t*> ptrs;
  for (int64_t i = 0; i < n; ++i) prompts.push_back(some_tokens(counts[i], static_cast<int>(i)));
  for (const auto& p : prompts) ptrs.push_back(p.data());
  const float* l = multi.prefill_multi(seqs, ptrs.data(), counts.data(), n);
  const std::vector<float> together(l, l + n * kVocab);
  for (int64_t i = 0; i < n; ++i) {
    CAPTURE(i);
    const float* a = separate.prefill(seqs[i], prompts[i].data(), counts[i]);
    CHECK(rel_diff(&together[i * kVocab], a, kVocab) <= tolerance(t));
    CHECK(multi.position(seqs[i]) == separate.position(seqs[i]));
  }
  for (int step = 0; step < 2; ++step) {
    const int32_t toks[4] = {int32_t(40 + step), int32_t(50 + step), int32_t(60 + step), int32_t(70 + step)};
    const float* a = multi.step_batch(seqs, toks, n);
    const std::vector<float> av(a, a + n * kVocab);
    const float* b = separate.step_batch(seqs, toks, n);
    CHECK(rel_diff(av.data(), b, n * kVocab) <= tolerance(t));
  }
}

}  // namespace

TEST_CASE("a multi-sequence prefill equals separate prefills") {
  for (DType t : {DType::F32, DType::F16}) {
    check_against_separate(t, 256, {5, 19, 3, 9});  // one pass of 36 rows
    check_against_separate(t, 8, {5, 19, 3, 9});    // passes of 8: sequences split across passes
    check_against_separate(t, 256, {1, 7});         // a one-token run among longer ones
    check_against_separate(t, 256, {1, 1, 1});      // one token each: the decode path
    check_against_separate(t, 4, {4, 4});           // each pass exactly one sequence
  }
}

TEST_CASE("a multi-sequence prefill checks everything before it runs") {
  const Model model = make_synthetic_model(small_gqa_config(), DType::F32, 1, false);
  DecoderOptions o;
  o.context = 8;
  o.n_seqs = 2;
  Decoder dec(model, o);
  const std::vector<int32_t> a = some_tokens(3, 0), b = some_tokens(9, 1);
  const int32_t* toks[2] = {a.data(), b.data()};
  const int64_t seqs[2] = {0, 1};
  const int64_t counts[2] = {3, 9};
  CHECK_THROWS_WITH(dec.prefill_multi(seqs, toks, counts, 2), doctest::Contains("context overflow"));
  CHECK(dec.position(0) == 0);
  CHECK(dec.position(1) == 0);
  const int64_t twice[2] = {1, 1};
  const int64_t fit[2] = {3, 3};
  CHECK_THROWS_WITH(dec.prefill_multi(twice, toks, fit, 2), doctest::Contains("appears twice"));
  const int64_t none[2] = {3, 0};
  CHECK_THROWS_WITH(dec.prefill_multi(seqs, toks, none, 2), doctest::Contains("at least one token"));
  const int32_t bad[1] = {kVocab};
  const int32_t* bad_toks[2] = {a.data(), bad};
  const int64_t one[2] = {3, 1};
  CHECK_THROWS_WITH(dec.prefill_multi(seqs, bad_toks, one, 2), doctest::Contains("outside the vocabulary"));
  const int64_t missing[2] = {0, 2};
  CHECK_THROWS_WITH(dec.prefill_multi(missing, toks, fit, 2), doctest::Contains("sequence"));
  CHECK_THROWS_WITH(dec.prefill_multi(seqs, toks, fit, 3), doctest::Contains("the decoder has 2"));
  CHECK(dec.position(0) == 0);
  CHECK(dec.position(1) == 0);
  dec.prefill_multi(seqs, toks, fit, 2);
  CHECK(dec.position(0) == 3);
  CHECK(dec.position(1) == 3);
}
