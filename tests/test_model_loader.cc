// ctest-labels: asan
// Model loading: the llama2.c and GGUF forms of stories260K give bit-identical
// weights; synthetic models survive a GGUF round trip in every weight type;
// malformed llama2.c checkpoints are clear errors.
#include <doctest/doctest.h>

#include "tests/error_matchers.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

#include "kernels/error.h"
#include "runtime/gguf.h"
#include "runtime/model_loader.h"
#include "runtime/synthetic.h"
#include "tests/shared_data.h"

using namespace qkv;
using qkv::test::have_shared;
using qkv::test::shared_path;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("qkv_test_loader_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

std::vector<float> decoded(const Matrix& m) {
  std::vector<float> out(size_t(m.rows * m.cols));
  const size_t row_bytes = dtype_row_bytes(m.type, size_t(m.cols));
  for (int64_t r = 0; r < m.rows; ++r) {
    decode_row(m.type, static_cast<const uint8_t*>(m.data) + r * row_bytes, size_t(m.cols), out.data() + r * m.cols);
  }
  return out;
}

// Every weight, named, in a fixed order.
std::vector<std::pair<std::string, const Matrix*>> all_weights(const Model& m) {
  std::vector<std::pair<std::string, const Matrix*>> w = {
      {"token_embd", &m.token_embd}, {"output_norm", &m.output_norm}, {"output", &m.output}};
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerWeights& l = m.layers[i];
    const std::string b = "blk." + std::to_string(i) + ".";
    w.insert(w.end(), {{b + "attn_norm", &l.attn_norm}, {b + "attn_q", &l.wq}, {b + "attn_k", &l.wk},
                       {b + "attn_v", &l.wv}, {b + "attn_output", &l.wo}, {b + "ffn_norm", &l.ffn_norm},
                       {b + "ffn_gate", &l.ffn_gate}, {b + "ffn_up", &l.ffn_up}, {b + "ffn_down", &l.ffn_down}});
  }
  return w;
}

// Same shapes, types and stored bytes, and the same values after decoding
// (compared as bits, so -0.0 vs 0.0 or NaN payloads would show).
void check_identical(const Model& a, const Model& b, bool compare_types = true) {
  const ModelConfig &ca = a.config, &cb = b.config;
  CHECK(ca.dim == cb.dim);
  CHECK(ca.hidden_dim == cb.hidden_dim);
  CHECK(ca.n_layers == cb.n_layers);
  CHECK(ca.n_heads == cb.n_heads);
  CHECK(ca.n_kv_heads == cb.n_kv_heads);
  CHECK(ca.head_dim == cb.head_dim);
  CHECK(ca.rope_dim == cb.rope_dim);
  CHECK(ca.vocab_size == cb.vocab_size);
  CHECK(ca.context_length == cb.context_length);
  CHECK(ca.rope_theta == cb.rope_theta);
  CHECK(ca.norm_eps == doctest::Approx(cb.norm_eps).epsilon(1e-6));
  const auto wa = all_weights(a), wb = all_weights(b);
  REQUIRE(wa.size() == wb.size());
  for (size_t i = 0; i < wa.size(); ++i) {
    INFO("tensor ", wa[i].first);
    const Matrix &x = *wa[i].second, &y = *wb[i].second;
    REQUIRE(x.rows == y.rows);
    REQUIRE(x.cols == y.cols);
    if (compare_types) CHECK(x.type == y.type);
    const std::vector<float> dx = decoded(x), dy = decoded(y);
    CHECK(std::memcmp(dx.data(), dy.data(), dx.size() * 4) == 0);
    if (x.type == y.type) {
      CHECK(std::memcmp(x.data, y.data, x.rows * dtype_row_bytes(x.type, size_t(x.cols))) == 0);
    }
  }
  CHECK((a.output.data == a.token_embd.data) == (b.output.data == b.token_embd.data));
}

// A llama2.c legacy checkpoint of an f32 model (tied or not).
std::vector<uint8_t> llama2c_bytes(const Model& m) {
  const ModelConfig& c = m.config;
  const bool tied = m.output.data == m.token_embd.data;
  std::vector<uint8_t> out;
  auto put_i32 = [&](int64_t v) {
    const int32_t x = static_cast<int32_t>(v);
    out.insert(out.end(), reinterpret_cast<const uint8_t*>(&x), reinterpret_cast<const uint8_t*>(&x) + 4);
  };
  auto put_matrix = [&](const Matrix& w) {
    REQUIRE(w.type == DType::F32);
    const uint8_t* p = static_cast<const uint8_t*>(w.data);
    out.insert(out.end(), p, p + w.rows * w.cols * 4);
  };
  for (int64_t v : {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, tied ? c.vocab_size : -c.vocab_size,
                    c.context_length}) {
    put_i32(v);
  }
  put_matrix(m.token_embd);
  for (const auto& l : m.layers) put_matrix(l.attn_norm);
  for (const auto& l : m.layers) put_matrix(l.wq);
  for (const auto& l : m.layers) put_matrix(l.wk);
  for (const auto& l : m.layers) put_matrix(l.wv);
  for (const auto& l : m.layers) put_matrix(l.wo);
  for (const auto& l : m.layers) put_matrix(l.ffn_norm);
  for (const auto& l : m.layers) put_matrix(l.ffn_gate);
  for (const auto& l : m.layers) put_matrix(l.ffn_down);
  for (const auto& l : m.layers) put_matrix(l.ffn_up);
  put_matrix(m.output_norm);
  out.resize(out.size() + size_t(c.context_length * c.head_dim) * 4, 0);  // freq_cis real + imag
  if (!tied) put_matrix(m.output);
  return out;
}

using test::throws_with;

ModelConfig small_config() {
  ModelConfig c = synthetic_preset("tiny");
  c.context_length = 16;  // keeps the llama2.c freq_cis padding small
  return c;
}

}  // namespace

TEST_CASE("stories260K: llama2.c .bin and GGUF load to bit-identical weights") {
  if (!have_shared("models/stories260K.bin") || !have_shared("models/stories260K.gguf")) return;
  const Model bin = load_model(shared_path("models/stories260K.bin"));
  const Model gguf = load_model(shared_path("models/stories260K.gguf"));
  const ModelConfig& c = bin.config;
  CHECK(c.dim == 64);
  CHECK(c.hidden_dim == 172);
  CHECK(c.n_layers == 5);
  CHECK(c.n_heads == 8);
  CHECK(c.n_kv_heads == 4);
  CHECK(c.head_dim == 8);
  CHECK(c.vocab_size == 512);
  CHECK(c.context_length == 512);
  CHECK(bin.output.data == bin.token_embd.data);  // shared classifier
  // The GGUF stores the classifier again as output.weight; identical bytes are tied.
  CHECK(gguf.output.data == gguf.token_embd.data);
  check_identical(bin, gguf);
  // Zero-copy: the .bin's weights point into its mapping, right after the header.
  CHECK(bin.storage != nullptr);
  CHECK(bin.token_embd.type == DType::F32);
  CHECK(bin.parameter_count() == gguf.parameter_count());
  // 512*64 embedding + 5 layers * (2*64 norms + 64*64*2 + 32*64*2 + 3*172*64) + 64
  CHECK(bin.parameter_count() == uint64_t(512 * 64 + 5 * (2 * 64 + 2 * 64 * 64 + 2 * 32 * 64 + 3 * 172 * 64) + 64));
  CHECK(bin.weight_bytes() == bin.parameter_count() * 4);
}

TEST_CASE("synthetic models round-trip through GGUF in every weight type") {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    for (bool tied : {true, false}) {
      INFO("type ", dtype_name(t), " tied ", tied);
      const Model m = make_synthetic_model(synthetic_preset("tiny"), t, 7, tied);
      CHECK(m.layers[0].wq.type == t);
      CHECK(m.layers[0].attn_norm.type == DType::F32);
      // FFN 172 is not a multiple of 32: Q8_0's ffn_down falls back to F16.
      CHECK(m.layers[0].ffn_down.type == (t == DType::Q8_0 ? DType::F16 : t));
      const std::string path = temp_path(std::string("synthetic_") + dtype_name(t) + ".gguf");
      write_gguf_model(m, path);
      const Model back = load_model(path);
      check_identical(m, back);
      CHECK(back.weight_bytes() == m.weight_bytes());
      CHECK(back.parameter_count() == m.parameter_count());
      // The file carries a byte-level vocabulary matching the model.
      const Tokenizer tok = Tokenizer::load(path);
      CHECK(tok.vocab_size() == 512);
      CHECK(tok.decode(tok.encode("synthetic text", true, false)) == "synthetic text");
      std::remove(path.c_str());
    }
  }
}

TEST_CASE("synthetic weights are deterministic and sanely scaled") {
  const ModelConfig c = synthetic_preset("tiny");
  const Model a = make_synthetic_model(c, DType::F32, 99);
  const Model b = make_synthetic_model(c, DType::F32, 99);
  const Model other = make_synthetic_model(c, DType::F32, 100);
  check_identical(a, b);
  CHECK(std::memcmp(a.layers[1].wq.data, other.layers[1].wq.data, 64 * 4) != 0);
  // Uniform with variance 1/cols: the sample variance of wq (4096 values) is
  // within 10% of 1/64; norms lie in [0.9, 1.1].
  const std::vector<float> wq = decoded(a.layers[0].wq);
  double sum2 = 0;
  for (float v : wq) sum2 += double(v) * v;
  CHECK(sum2 / wq.size() == doctest::Approx(1.0 / 64).epsilon(0.1));
  for (float v : decoded(a.layers[0].ffn_norm)) CHECK((v >= 0.9f && v <= 1.1f));
  // Q8_0 is the quantized F32 model: within half a quantization step per block.
  const Model q = make_synthetic_model(c, DType::Q8_0, 99);
  const std::vector<float> wq8 = decoded(q.layers[0].wq);
  for (size_t i = 0; i < wq.size(); i += 32) {
    float amax = 0;
    for (size_t k = 0; k < 32; ++k) amax = std::fmax(amax, std::fabs(wq[i + k]));
    // d = amax/127 rounded to f16 (rel. error 2^-11); |x - d*q| <= d/2 plus the scale's error * 127.
    const double tol = amax / 127.0 * 0.5 + amax * 1e-3;
    for (size_t k = 0; k < 32; ++k) CHECK(std::fabs(wq[i + k] - wq8[i + k]) <= tol);
  }
  CHECK_THROWS_AS(synthetic_preset("7B"), Error);
  CHECK(synthetic_preset("143M").n_layers == 30);
  CHECK(synthetic_preset("1.1B").n_kv_heads == 4);
}

TEST_CASE("llama2.c checkpoints: tied and unshared classifier") {
  for (bool tied : {true, false}) {
    INFO("tied ", tied);
    const Model m = make_synthetic_model(small_config(), DType::F32, 3, tied);
    const std::string path = temp_path(tied ? "tied.bin" : "untied.bin");
    write_bytes(path, llama2c_bytes(m));
    const Model back = load_model(path);
    check_identical(m, back);
    CHECK((back.output.data == back.token_embd.data) == tied);
    std::remove(path.c_str());
  }
}

TEST_CASE("malformed llama2.c checkpoints are clear errors") {
  const Model m = make_synthetic_model(small_config(), DType::F32, 5, false);
  const std::vector<uint8_t> good = llama2c_bytes(m);
  const std::string path = temp_path("bad.bin");
  SUBCASE("truncated at many offsets") {
    for (size_t cut : {size_t(0), size_t(1), size_t(4), size_t(27), size_t(28), size_t(29), size_t(100),
                       good.size() / 2, good.size() - 4, good.size() - 1}) {
      INFO("cut at ", cut);
      write_bytes(path, std::vector<uint8_t>(good.begin(), good.begin() + cut));
      CHECK(throws_with([&] { load_model(path); }, path));
      CHECK(throws_with([&] { load_model(path); }, cut < 28 ? "header" : "truncated"));
    }
  }
  SUBCASE("trailing data") {
    std::vector<uint8_t> bad = good;
    bad.resize(bad.size() + 4, 0);
    write_bytes(path, bad);
    CHECK(throws_with([&] { load_model(path); }, "trailing data"));
  }
  SUBCASE("negative and zero header fields") {
    for (int field : {0, 1, 2, 3, 4, 6}) {
      for (int32_t value : {0, -1, INT32_MIN}) {
        std::vector<uint8_t> bad = good;
        std::memcpy(bad.data() + 4 * field, &value, 4);
        write_bytes(path, bad);
        INFO("field ", field, " = ", value);
        CHECK(throws_with([&] { load_model(path); }, "must be positive"));
      }
    }
    std::vector<uint8_t> bad = good;
    const int32_t zero = 0;
    std::memcpy(bad.data() + 20, &zero, 4);
    write_bytes(path, bad);
    CHECK(throws_with([&] { load_model(path); }, "vocab_size = 0"));
  }
  SUBCASE("absurd sizes never allocate") {
    std::vector<uint8_t> bad = good;
    const int32_t huge = 0x7fffffff;
    std::memcpy(bad.data(), &huge, 4);  // dim
    write_bytes(path, bad);
    CHECK(throws_with([&] { load_model(path); }, "out of range"));
    bad = good;
    const int32_t big_vocab = -(1 << 23);  // in range, but the file is far too short
    std::memcpy(bad.data() + 20, &big_vocab, 4);
    write_bytes(path, bad);
    CHECK(throws_with([&] { load_model(path); }, "truncated"));
  }
  SUBCASE("a header whose byte count passes 2^64") {
    // dim 2^24, hidden 11184808, 4096 layers, 2^23 heads of 2 dims, 1 KV head,
    // vocab 8191, seq_len 16: 2^62 + 32 floats, whose byte count 28 + 4 * floats
    // wraps to 156 in 64 bits, this file's size.
    const int32_t h[7] = {1 << 24, 11184808, 4096, 1 << 23, 1, 8191, 16};
    std::vector<uint8_t> bad(156, 0);
    std::memcpy(bad.data(), h, sizeof(h));
    write_bytes(path, bad);
    CHECK(throws_with([&] { load_model(path); }, "implies more than 2^64"));
  }
  SUBCASE("inconsistent heads") {
    std::vector<uint8_t> bad = good;
    const int32_t heads = 3;  // 64 % 3 != 0
    std::memcpy(bad.data() + 12, &heads, 4);
    write_bytes(path, bad);
    CHECK(throws_with([&] { load_model(path); }, "not a multiple of n_heads"));
    bad = good;
    const int32_t kv_heads = 3;  // 4 % 3 != 0
    std::memcpy(bad.data() + 16, &kv_heads, 4);
    write_bytes(path, bad);
    CHECK(throws_with([&] { load_model(path); }, "n_kv_heads"));
  }
  SUBCASE("newer llama2.c export format") {
    std::vector<uint8_t> bad = good;
    std::memcpy(bad.data(), "ak42", 4);
    write_bytes(path, bad);
    CHECK(throws_with([&] { load_model(path); }, "ak42"));
  }
  SUBCASE("missing file") {
    CHECK(throws_with([] { load_model("/nonexistent/qkv/model.bin"); }, "cannot open"));
  }
  std::remove(path.c_str());
}
