// ctest-labels: asan
// The encoder forward pass (runtime/encoder.h) against llama.cpp b4748's
// embeddings of ../shared/models/arch-{bert,nomic-bert,bert-rank}-a.gguf
// (../shared/reference/*.embed.json, embed-README.md): per-token final hidden
// states, MEAN and CLS pooled (averaged here from the hidden states), rank
// scores; each text alone and all texts packed in one forward(), which must
// agree; and the errors of bad input.
//
// Tolerances. bert's GELU is ggml's fp16 table: a float rounding difference
// anywhere before it can flip one fp16 rounding (a step of 2^-11 relative),
// so llama.cpp disagrees with itself by up to 4.9e-4 per token between its
// batched and single runs, and with a float64 emulation of its own
// arithmetic by 4.9e-4 per token, 1.9e-4 pooled (embed-README.md). Allowed
// here: 2e-3 per token, 1e-3 pooled, CLS and rank score, and 1e-3 between
// packed and single runs. Measured (AVX-512 host, 1 and 2 threads): per token
// 2.4e-4, MEAN 1.2e-4, CLS 1.9e-4, packed vs single 2.3e-4; rank scores
// 2.9e-6, their CLS states 7.4e-6.
// nomic-bert has no table (SwiGLU): llama.cpp is within 3e-6 of float64 per
// token; allowed 2e-5 per token and 1e-5 pooled and packed vs single (values
// up to ~3.6: a few f32 ulps of the inputs summed over 2 layers of 128-256
// terms). Measured: per token 2.6e-6, MEAN 8.5e-7, packed vs single 3.1e-6.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/ops.h"
#include "runtime/arch.h"
#include "runtime/encoder.h"
#include "runtime/model_loader.h"
#include "tests/shared_data.h"

using namespace qkv;
using nlohmann::json;

namespace {

json read_json(const std::string& rel) {
  std::ifstream f(test::shared_path(rel));
  REQUIRE(f.good());
  return json::parse(f);
}

// The model as qkv_model_load prepares it (loaded, then laid out).
Model load_laid_out(const std::string& rel) {
  Model m = load_model(test::shared_path(rel));
  lay_out_weights(m);
  return m;
}

std::vector<std::vector<int32_t>> ids_of(const json& texts) {
  std::vector<std::vector<int32_t>> ids;
  for (const json& t : texts) ids.push_back(t.at("ids").get<std::vector<int32_t>>());
  return ids;
}

// Hidden states [sum of lengths][dim] of the sequences packed in one forward().
std::vector<float> run_packed(Encoder& enc, const std::vector<std::vector<int32_t>>& seqs) {
  std::vector<const int32_t*> tokens;
  std::vector<int64_t> counts;
  int64_t total = 0;
  for (const auto& s : seqs) {
    tokens.push_back(s.data());
    counts.push_back(int64_t(s.size()));
    total += int64_t(s.size());
  }
  std::vector<float> hidden(size_t(total * enc.model().config.dim));
  enc.forward(tokens.data(), counts.data(), int64_t(seqs.size()), hidden.data());
  return hidden;
}

// Each sequence's hidden states from its own forward().
std::vector<std::vector<float>> run_each(Encoder& enc, const std::vector<std::vector<int32_t>>& seqs) {
  std::vector<std::vector<float>> out;
  for (const auto& s : seqs) out.push_back(run_packed(enc, {s}));
  return out;
}

// The packed result split per sequence.
std::vector<std::vector<float>> split(const std::vector<float>& packed, const std::vector<std::vector<int32_t>>& seqs,
                                      int64_t dim) {
  std::vector<std::vector<float>> out;
  size_t at = 0;
  for (const auto& s : seqs) {
    const size_t n = s.size() * size_t(dim);
    out.emplace_back(packed.begin() + long(at), packed.begin() + long(at + n));
    at += n;
  }
  return out;
}

std::vector<float> mean_of(const std::vector<float>& h, int64_t dim) {
  const int64_t n = int64_t(h.size()) / dim;
  std::vector<double> sum(size_t(dim), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < dim; ++i) sum[i] += h[t * dim + i];
  }
  std::vector<float> mean(static_cast<size_t>(dim));
  for (int64_t i = 0; i < dim; ++i) mean[i] = float(sum[i] / double(n));
  return mean;
}

double max_diff(const float* got, const std::vector<float>& want) {
  double d = 0;
  for (size_t i = 0; i < want.size(); ++i) d = std::max(d, std::fabs(double(got[i]) - double(want[i])));
  return d;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  return max_diff(a.data(), b);
}

struct Diffs {
  double per_token = 0, mean = 0, cls = 0, packed_vs_single = 0;
};

// Compares an embedding model's hidden states with the reference JSON: per
// token for the texts of per_token, MEAN (and CLS when stored) for every text,
// from the packed run and from the single runs.
Diffs compare_embeddings(const std::string& model_rel, const std::string& ref_rel) {
  Diffs d;
  const json ref = read_json(ref_rel);
  const Model m = load_laid_out(model_rel);
  const int64_t dim = m.config.dim;
  const auto seqs = ids_of(ref.at("texts"));
  REQUIRE(seqs.size() == 8);
  Encoder enc(m, 512);
  const auto packed = split(run_packed(enc, seqs), seqs, dim);
  const auto single = run_each(enc, seqs);
  for (size_t i = 0; i < seqs.size(); ++i) d.packed_vs_single = std::max(d.packed_vs_single, max_diff(packed[i], single[i]));

  const json& pooled = ref.at("pooled");
  for (const auto* run : {&packed, &single}) {
    for (size_t i = 0; i < seqs.size(); ++i) {
      const std::vector<float>& h = (*run)[i];
      d.mean = std::max(d.mean, max_diff(mean_of(h, dim), pooled.at("mean").at("raw").at(i).get<std::vector<float>>()));
      if (pooled.contains("cls")) {
        d.cls = std::max(d.cls, max_diff(h.data(), pooled.at("cls").at("raw").at(i).get<std::vector<float>>()));
      }
    }
    const json& per_token = ref.at("per_token");
    for (size_t k = 0; k < per_token.at("texts").size(); ++k) {
      const std::string name = per_token.at("texts").at(k).get<std::string>();
      size_t i = 0;
      while (i < seqs.size() && ref.at("texts").at(i).at("name") != name) ++i;
      REQUIRE(i < seqs.size());
      const json& rows = per_token.at("embeddings").at(k);
      REQUIRE(rows.size() == seqs[i].size());
      for (size_t t = 0; t < rows.size(); ++t) {
        d.per_token = std::max(d.per_token, max_diff(&(*run)[i][t * size_t(dim)], rows.at(t).get<std::vector<float>>()));
      }
    }
  }
  std::printf("%s: max |diff| per token %.3g, MEAN %.3g, CLS %.3g; packed vs single %.3g\n", model_rel.c_str(),
              d.per_token, d.mean, d.cls, d.packed_vs_single);
  return d;
}

}  // namespace

TEST_CASE("bert and nomic-bert files load as encoders with their settings") {
  if (!test::have_shared("models/arch-bert-rank-a.gguf") || !test::have_shared("models/arch-nomic-bert-a.gguf")) return;
  const Model bert = load_laid_out("models/arch-bert-a.gguf");
  const ModelConfig& b = bert.config;
  CHECK(b.architecture == "bert");
  CHECK_FALSE(b.causal);
  CHECK(b.pooling_type == 1);
  CHECK(b.learned_positions);
  CHECK(b.layer_norm);
  CHECK_FALSE(b.ffn_gated);
  CHECK(b.activation == Activation::GeluTanhTable);
  CHECK_FALSE(b.rank_head);
  CHECK(b.norm_eps == doctest::Approx(1e-12));
  CHECK(bert.token_embd.type == DType::F16);
  CHECK(bert.position_embd.rows == 512);
  CHECK(bert.layers[1].ffn_down_b.cols == 128);
  CHECK(bert.output.data == nullptr);
  // The 37 tensors' values: embeddings and their norm, then per layer Q/K/V/output (+ biases), two norms, up, down.
  CHECK(bert.parameter_count() == 30522ull * 128 + 512 * 128 + 2 * 128 + 2 * 128 +
                                      2 * (4 * (128 * 128 + 128) + 2 * 128 + 128 * 256 + 256 + 256 * 128 + 128 + 2 * 128));
  const std::vector<std::string> lines = describe_arch(b);
  CHECK(std::any_of(lines.begin(), lines.end(), [](const std::string& l) { return l.find("learned") != std::string::npos; }));

  const Model rank = load_laid_out("models/arch-bert-rank-a.gguf");
  CHECK(rank.config.pooling_type == 4);
  CHECK(rank.config.rank_head);
  CHECK(rank.cls_out.cols == 128);
  CHECK(rank.cls_out_b.cols == 1);

  const Model nomic = load_laid_out("models/arch-nomic-bert-a.gguf");
  const ModelConfig& n = nomic.config;
  CHECK(n.architecture == "nomic-bert");
  CHECK_FALSE(n.causal);
  CHECK(n.pooling_type == 1);
  CHECK_FALSE(n.learned_positions);
  CHECK(n.ffn_gated);
  CHECK(n.rope_style == RopeStyle::Neox);
  CHECK(n.rope_theta == 1000.0f);
  CHECK(n.rope_dim == 64);
  CHECK(nomic.position_embd.data == nullptr);
  CHECK(nomic.layers[0].wk.rows == 128);
}

TEST_CASE("bert: per-token, MEAN and CLS against llama.cpp; packed equals one text at a time") {
  if (!test::have_shared("models/arch-bert-a.gguf") || !test::have_shared("reference/arch-bert-a.embed.json")) return;
  const Diffs d = compare_embeddings("models/arch-bert-a.gguf", "reference/arch-bert-a.embed.json");
  CHECK(d.per_token <= 2e-3);
  CHECK(d.mean <= 1e-3);
  CHECK(d.cls <= 1e-3);
  CHECK(d.packed_vs_single <= 1e-3);  // fp16 GELU rounding flips, as llama.cpp's own 4.9e-4
}

TEST_CASE("nomic-bert: per-token and MEAN against llama.cpp; packed equals one text at a time") {
  if (!test::have_shared("models/arch-nomic-bert-a.gguf") || !test::have_shared("reference/arch-nomic-bert-a.embed.json")) {
    return;
  }
  const Diffs d = compare_embeddings("models/arch-nomic-bert-a.gguf", "reference/arch-nomic-bert-a.embed.json");
  CHECK(d.per_token <= 2e-5);
  CHECK(d.mean <= 1e-5);
  CHECK(d.packed_vs_single <= 1e-5);
}

TEST_CASE("bert rank: the classifier head's scores and the CLS states against llama.cpp") {
  if (!test::have_shared("models/arch-bert-rank-a.gguf") || !test::have_shared("reference/arch-bert-rank-a.embed.json")) {
    return;
  }
  const json ref = read_json("reference/arch-bert-rank-a.embed.json");
  const Model m = load_laid_out("models/arch-bert-rank-a.gguf");
  const int64_t dim = m.config.dim;
  const auto seqs = ids_of(ref.at("pairs"));
  Encoder enc(m, 128);
  REQUIRE(enc.has_rank_head());
  const auto packed = split(run_packed(enc, seqs), seqs, dim);
  const auto single = run_each(enc, seqs);
  double score_diff = 0, cls_diff = 0;
  for (const auto* run : {&packed, &single}) {
    for (size_t i = 0; i < seqs.size(); ++i) {
      const float score = enc.rank_score((*run)[i].data());
      score_diff = std::max(score_diff, std::fabs(double(score) - ref.at("rank_scores").at(i).get<double>()));
      cls_diff = std::max(cls_diff, max_diff((*run)[i].data(), ref.at("cls_embedding").at("raw").at(i).get<std::vector<float>>()));
    }
  }
  std::printf("bert rank: max |diff| rank score %.3g, CLS %.3g\n", score_diff, cls_diff);
  CHECK(score_diff <= 1e-3);
  CHECK(cls_diff <= 1e-3);
}

TEST_CASE("encoder errors: bad ids, lengths and models are refused before anything runs") {
  if (!test::have_shared("models/arch-bert-a.gguf") || !test::have_shared("models/arch-qwen2-a.gguf")) return;
  const Model m = load_laid_out("models/arch-bert-a.gguf");
  Encoder enc(m, 600);
  std::vector<float> hidden(600 * 128);
  auto run = [&](std::vector<std::vector<int32_t>> seqs) {
    std::vector<const int32_t*> tokens;
    std::vector<int64_t> counts;
    for (const auto& s : seqs) {
      tokens.push_back(s.data());
      counts.push_back(int64_t(s.size()));
    }
    enc.forward(tokens.data(), counts.data(), int64_t(seqs.size()), hidden.data());
  };
  const std::vector<int32_t> ok = {101, 7592, 102};
  CHECK_THROWS_WITH_AS(run({ok, {101, 30522, 102}}), doctest::Contains("token id 30522"), Error);
  CHECK_THROWS_WITH_AS(run({{101, -1}}), doctest::Contains("outside the vocabulary"), Error);
  CHECK_THROWS_WITH_AS(run({ok, {}}), doctest::Contains("sequence 1 is empty"), Error);
  CHECK_THROWS_WITH_AS(run({std::vector<int32_t>(513, 101)}), doctest::Contains("over the model's context of 512"), Error);
  CHECK_THROWS_WITH_AS(run({std::vector<int32_t>(400, 101), std::vector<int32_t>(300, 101)}),
                       doctest::Contains("more than this encoder's 600"), Error);
  run({ok});  // still usable after the refusals
  CHECK(std::isfinite(hidden[0]));
  CHECK_THROWS_WITH_AS(enc.rank_score(hidden.data()), doctest::Contains("no classifier head"), Error);
  CHECK_THROWS_WITH_AS(Encoder(m, 0), doctest::Contains("max_tokens 0"), Error);
  const Model decoder = load_model(test::shared_path("models/arch-qwen2-a.gguf"));
  CHECK_THROWS_WITH_AS(Encoder(decoder, 16), doctest::Contains("decoder family"), Error);
}

TEST_CASE("the encoder's kernels: ggml's fp16-table GELU and LayerNorm with bias") {
  // Outside (-10, 10) the table is bypassed: 0 below, x above.
  std::vector<float> x = {-11.0f, -10.0f, 10.0f, 12.5f, 0.0f};
  gelu_f16_table(x.data(), x.size());
  CHECK(x[0] == 0.0f);
  CHECK(x[1] == 0.0f);
  CHECK(x[2] == 10.0f);
  CHECK(x[3] == 12.5f);
  CHECK(x[4] == 0.0f);
  // Inside, an fp16 value near the tanh form at the input rounded to fp16:
  // within half an fp16 ulp of the result (2^-11 relative) plus the float
  // formula's own error, which for x < 0 is the cancellation in 1 + tanh
  // (~|x| * 2^-24 absolute), so 1e-6 (1 + |x|) absolute on top.
  double worst = 0;
  for (int i = -9990; i < 9990; i += 7) {
    const float v = float(i) * 1e-3f + 1.0e-4f;
    float g = v;
    gelu_f16_table(&g, 1);
    CHECK(f16_to_f32(f32_to_f16(g)) == g);
    const double h = double(f16_to_f32(f32_to_f16(v)));
    const double want = 0.5 * h * (1.0 + std::tanh(0.7978845608028654 * (h + 0.044715 * h * h * h)));
    worst = std::max(worst, (std::fabs(double(g) - want) - std::fabs(want) / 2048) / (1 + std::fabs(h)));
  }
  CHECK(worst <= 1e-6);

  // LayerNorm against a float64 reference, in place.
  const size_t n = 200;
  std::vector<float> row(n), w(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    row[i] = 3.0f + std::sin(float(i) * 0.37f) * 2.0f;
    w[i] = 1.0f + 0.01f * float(i % 7);
    b[i] = 0.1f * float(int(i % 5) - 2);
  }
  double mean = 0, var = 0;
  for (float v : row) mean += v;
  mean /= double(n);
  for (float v : row) var += (v - mean) * (v - mean);
  var /= double(n);
  std::vector<double> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = (row[i] - mean) / std::sqrt(var + 1e-12) * w[i] + b[i];
  layernorm(row.data(), w.data(), b.data(), row.data(), n, 1e-12f);
  for (size_t i = 0; i < n; ++i) CHECK(row[i] == doctest::Approx(want[i]).epsilon(1e-5));
}
