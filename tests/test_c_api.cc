// ctest-labels: asan
// The C API (include/qkv.h): every function, every error path (NULL pointers,
// bad paths, malformed files, context overflow, small buffers, mixed contexts),
// logits against the C++ decoder, batched steps against one-by-one steps, and
// qkv_attention against a direct fp64 computation.
//
// Numeric tests run on a synthetic GQA model (runtime/synthetic.h, written to a
// temporary GGUF and loaded through the API), so they need no shared data; the
// tokenizer and generation tests use ../shared/models/stories260K and skip when
// it is absent.
#include <doctest/doctest.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/simd_target.h"
#include "qkv.h"
#include "runtime/decoder.h"
#include "runtime/model_loader.h"
#include "runtime/synthetic.h"
#include "runtime/tokenizer.h"
#include "runtime/version.h"
#include "tests/q8_query.h"
#include "tests/shared_data.h"

namespace {

std::string temp_path(const std::string& name) {
  return std::string(QKV_BINARY_DIR) + "/test_c_api." + std::to_string(::getpid()) + "." + name;
}

// A file deleted when the test ends.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name) : path(temp_path(name)) {}
  ~TempFile() { std::remove(path.c_str()); }
  void write(const std::string& bytes) const {
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The "tiny" synthetic preset (dim 64, 2 layers, 4 query / 2 KV heads, vocab
// 512, ctx 512) with f32 weights, as a GGUF file with a byte-level vocabulary.
const std::string& synthetic_gguf() {
  static TempFile file("tiny.gguf");
  static bool written = false;
  if (!written) {
    const qkv::Model m = qkv::make_synthetic_model(qkv::synthetic_preset("tiny"), qkv::DType::F32, 7);
    qkv::write_gguf_model(m, file.path);
    written = true;
  }
  return file.path;
}

qkv_model* load_ok(const std::string& path, const char* tokenizer = nullptr) {
  qkv_model_options o;
  qkv_model_options_init(&o);
  o.tokenizer_path = tokenizer;
  qkv_model* m = nullptr;
  const qkv_status st = qkv_model_load(path.c_str(), &o, &m);
  INFO(qkv_last_error());
  REQUIRE(st == QKV_OK);
  REQUIRE(m != nullptr);
  return m;
}

qkv_context_options one_thread_options(int64_t context = 0) {
  qkv_context_options o;
  qkv_context_options_init(&o);
  o.threads = 1;
  o.context = context;
  o.kv_type = QKV_TYPE_F32;
  return o;
}

std::vector<int32_t> random_tokens(size_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(3, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(n);
  for (auto& x : t) x = dist(rng);
  return t;
}

bool message_has(const char* needle) { return std::strstr(qkv_last_error(), needle) != nullptr; }

double max_abs_diff(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::fmax(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

double max_abs(const float* a, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::fmax(m, std::fabs(double(a[i])));
  return m;
}

}  // namespace

TEST_CASE("c api: version, SIMD target, status names") {
  CHECK(std::string(qkv_version()) == qkv::version_string());
  CHECK(std::string(qkv_simd_target()) == qkv::simd_target_name());
  CHECK(std::strlen(qkv_simd_target()) > 0);
  const qkv_status all[] = {QKV_OK, QKV_ERR_INVALID_ARGUMENT, QKV_ERR_IO, QKV_ERR_FORMAT,
                            QKV_ERR_CONTEXT_OVERFLOW, QKV_ERR_OUT_OF_MEMORY, QKV_ERR_BUFFER_TOO_SMALL,
                            QKV_ERR_INTERNAL};
  std::vector<std::string> names;
  for (qkv_status s : all) {
    const std::string n = qkv_status_name(s);
    CHECK(n != "unknown status");
    for (const std::string& other : names) CHECK(n != other);
    names.push_back(n);
  }
}

TEST_CASE("c api: every entry point rejects NULL without crashing") {
  qkv_model* m = load_ok(synthetic_gguf());
  qkv_session* s = nullptr;
  qkv_context_options co = one_thread_options(16);
  REQUIRE(qkv_session_create(m, &co, &s) == QKV_OK);
  const int32_t tok[2] = {5, 6};
  float f[4];
  int64_t n = 0;
  int32_t t = 0;
  char text[8];
  qkv_model_info info;
  qkv_model* out_model = reinterpret_cast<qkv_model*>(&n);  // must be reset to NULL on failure
  qkv_context* ctx = nullptr;
  qkv_session* sess = nullptr;
  qkv_sampler_options so;
  qkv_sampler_options_init(&so);
  qkv_attention_params ap;
  qkv_attention_params_init(&ap);

  CHECK(qkv_model_load(nullptr, nullptr, &out_model) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(out_model == nullptr);
  CHECK(message_has("path"));
  CHECK(qkv_model_load(synthetic_gguf().c_str(), nullptr, nullptr) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_model_get_info(nullptr, &info) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_model_get_info(m, nullptr) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_tokenize(nullptr, "a", 1, nullptr, 0, &n) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_tokenize(m, nullptr, 1, nullptr, 0, &n) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_tokenize(m, "a", 1, nullptr, 0, nullptr) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_tokenize(m, "a", 1, nullptr, 4, &n) == QKV_ERR_INVALID_ARGUMENT);  // capacity but no buffer
  CHECK(qkv_tokenize(m, "a", 1, &t, -1, &n) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_detokenize(nullptr, tok, 2, text, 8, &n) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_detokenize(m, nullptr, 2, text, 8, &n) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_detokenize(m, tok, -1, text, 8, &n) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_detokenize(m, tok, 2, nullptr, 8, &n) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_detokenize(m, tok, 2, text, 8, nullptr) == QKV_ERR_INVALID_ARGUMENT);
  ctx = reinterpret_cast<qkv_context*>(&n);
  CHECK(qkv_context_create(nullptr, 1, nullptr, &ctx) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(ctx == nullptr);
  CHECK(qkv_context_create(m, 1, nullptr, nullptr) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_context_session(nullptr, 0, &sess) == QKV_ERR_INVALID_ARGUMENT);
  sess = s;
  CHECK(qkv_session_create(nullptr, nullptr, &sess) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(sess == nullptr);
  CHECK(qkv_session_create(m, nullptr, nullptr) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_session_prefill(nullptr, tok, 2, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_session_prefill(s, nullptr, 2, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_session_step(nullptr, 5, f, 4) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_step_batch(nullptr, tok, 1, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_step_batch(&s, nullptr, 1, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  qkv_session* with_null[2] = {s, nullptr};
  CHECK(qkv_step_batch(with_null, tok, 2, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(message_has("sessions[1] is NULL"));
  CHECK(qkv_session_position(nullptr, &n) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_session_position(s, nullptr) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_session_truncate(nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_session_set_sampler(nullptr, &so) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_session_set_sampler(s, nullptr) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_session_sample(nullptr, &t) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_session_sample(s, nullptr) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_generate(nullptr, "a", nullptr, nullptr, nullptr, nullptr) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_generate(s, nullptr, nullptr, nullptr, nullptr, nullptr) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_attention(nullptr, f, f, f, QKV_TYPE_F32, f) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_attention(&ap, nullptr, f, f, QKV_TYPE_F32, f) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_attention(&ap, f, nullptr, f, QKV_TYPE_F32, f) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_attention(&ap, f, f, nullptr, QKV_TYPE_F32, f) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_attention(&ap, f, f, f, QKV_TYPE_F32, nullptr) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(message_has("out is NULL"));

  // The functions without a status accept NULL too.
  qkv_model_options_init(nullptr);
  qkv_context_options_init(nullptr);
  qkv_sampler_options_init(nullptr);
  qkv_generate_options_init(nullptr);
  qkv_attention_params_init(nullptr);
  qkv_model_free(nullptr);
  qkv_context_free(nullptr);
  qkv_session_free(nullptr);
  CHECK(qkv_context_kv_bytes(nullptr) == 0);
  CHECK(qkv_session_kv_bytes(nullptr) == 0);

  // Nothing above touched the session.
  REQUIRE(qkv_session_position(s, &n) == QKV_OK);
  CHECK(n == 0);
  qkv_session_free(s);
  qkv_model_free(m);
}

TEST_CASE("c api: load errors are IO or FORMAT with a readable message") {
  qkv_model* m = reinterpret_cast<qkv_model*>(&m);
  SUBCASE("missing file") {
    CHECK(qkv_model_load("/nonexistent/model.gguf", nullptr, &m) == QKV_ERR_IO);
    CHECK(m == nullptr);
    CHECK(message_has("/nonexistent/model.gguf"));
    CHECK(message_has("No such file"));
  }
  SUBCASE("a directory") {
    CHECK(qkv_model_load(QKV_BINARY_DIR, nullptr, &m) == QKV_ERR_IO);
    CHECK(message_has("not a regular file"));
  }
  SUBCASE("missing tokenizer") {
    qkv_model_options o;
    qkv_model_options_init(&o);
    o.tokenizer_path = "/nonexistent/tok.bin";
    CHECK(qkv_model_load(synthetic_gguf().c_str(), &o, &m) == QKV_ERR_IO);
    CHECK(message_has("tokenizer"));
    CHECK(m == nullptr);
  }
  SUBCASE("empty file") {
    TempFile f("empty.bin");
    f.write("");
    CHECK(qkv_model_load(f.path.c_str(), nullptr, &m) == QKV_ERR_FORMAT);
    CHECK(m == nullptr);
    CHECK(std::strlen(qkv_last_error()) > 0);
  }
  SUBCASE("garbage") {
    TempFile f("garbage.bin");
    std::string bytes(4096, '\0');
    std::mt19937 rng(3);
    for (char& c : bytes) c = static_cast<char>(rng());
    f.write(bytes);
    CHECK(qkv_model_load(f.path.c_str(), nullptr, &m) == QKV_ERR_FORMAT);
    CHECK(m == nullptr);
    INFO(qkv_last_error());
    CHECK(message_has(f.path.c_str()));
  }
  SUBCASE("truncated GGUF, at many lengths") {
    const std::string whole = read_all(synthetic_gguf());
    REQUIRE(whole.size() > 1000);
    TempFile f("truncated.gguf");
    for (size_t len : {size_t(3), size_t(4), size_t(20), size_t(200), whole.size() / 2, whole.size() - 1}) {
      CAPTURE(len);
      f.write(whole.substr(0, len));
      CHECK(qkv_model_load(f.path.c_str(), nullptr, &m) == QKV_ERR_FORMAT);
      CHECK(m == nullptr);
      CHECK(std::strlen(qkv_last_error()) > 0);
    }
  }
  SUBCASE("truncated llama2.c checkpoint") {
    if (!qkv::test::have_shared("models/stories260K.bin")) return;
    const std::string whole = read_all(qkv::test::shared_path("models/stories260K.bin"));
    TempFile f("truncated.bin");
    for (size_t len : {size_t(10), size_t(28), whole.size() / 2, whole.size() - 4}) {
      CAPTURE(len);
      f.write(whole.substr(0, len));
      CHECK(qkv_model_load(f.path.c_str(), nullptr, &m) == QKV_ERR_FORMAT);
      CHECK(m == nullptr);
    }
  }
  SUBCASE("truncated tokenizer") {
    if (!qkv::test::have_shared("models/tok512.bin")) return;
    const std::string whole = read_all(qkv::test::shared_path("models/tok512.bin"));
    TempFile f("truncated_tok.bin");
    f.write(whole.substr(0, whole.size() / 2));
    qkv_model_options o;
    qkv_model_options_init(&o);
    o.tokenizer_path = f.path.c_str();
    CHECK(qkv_model_load(qkv::test::shared_path("models/stories260K.bin").c_str(), &o, &m) == QKV_ERR_FORMAT);
    CHECK(m == nullptr);
  }
}

TEST_CASE("c api: model info matches the loader") {
  qkv_model* m = load_ok(synthetic_gguf());
  const qkv::Model ref = qkv::load_model(synthetic_gguf());
  qkv_model_info info;
  REQUIRE(qkv_model_get_info(m, &info) == QKV_OK);
  CHECK(std::string(info.architecture) == "llama");
  CHECK(info.dim == ref.config.dim);
  CHECK(info.hidden_dim == ref.config.hidden_dim);
  CHECK(info.n_layers == ref.config.n_layers);
  CHECK(info.n_heads == 4);
  CHECK(info.n_kv_heads == 2);
  CHECK(info.head_dim == ref.config.head_dim);
  CHECK(info.vocab_size == 512);
  CHECK(info.context_length == ref.config.context_length);
  CHECK(info.parameters == ref.parameter_count());
  CHECK(info.weight_bytes == ref.weight_bytes());
  CHECK(info.has_tokenizer != 0);  // write_gguf_model stores a byte-level vocabulary
  CHECK(info.bos_id == 1);
  CHECK(info.eos_id == 2);
  qkv_model_free(m);

  if (!qkv::test::have_shared("models/stories260K.bin")) return;
  m = load_ok(qkv::test::shared_path("models/stories260K.bin"));  // no tokenizer file
  REQUIRE(qkv_model_get_info(m, &info) == QKV_OK);
  CHECK(info.has_tokenizer == 0);
  CHECK(info.bos_id == -1);
  CHECK(info.eos_id == -1);
  CHECK(info.vocab_size == 512);
  int64_t n = 0;
  CHECK(qkv_tokenize(m, "hello", 1, nullptr, 0, &n) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(message_has("tokenizer"));
  qkv_session* s = nullptr;
  REQUIRE(qkv_session_create(m, nullptr, &s) == QKV_OK);
  CHECK(qkv_generate(s, "hello", nullptr, nullptr, nullptr, nullptr) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(message_has("tokenizer"));
  qkv_session_free(s);
  qkv_model_free(m);
}

TEST_CASE("c api: tokenize and detokenize match the tokenizer, with size queries") {
  if (!qkv::test::have_shared("models/stories260K.bin") || !qkv::test::have_shared("models/tok512.bin")) return;
  const std::string tok_path = qkv::test::shared_path("models/tok512.bin");
  qkv_model* m = load_ok(qkv::test::shared_path("models/stories260K.bin"), tok_path.c_str());
  const qkv::Tokenizer ref = qkv::Tokenizer::load(tok_path, 512);
  const char* text = "Once upon a time, a little cat sat on the mat.";
  const std::vector<int32_t> expected = ref.encode(text, true, false);

  int64_t n = -1;
  CHECK(qkv_tokenize(m, text, 1, nullptr, 0, &n) == QKV_ERR_BUFFER_TOO_SMALL);  // size query
  CHECK(n == static_cast<int64_t>(expected.size()));
  std::vector<int32_t> ids(expected.size() - 1, -7);
  CHECK(qkv_tokenize(m, text, 1, ids.data(), static_cast<int64_t>(ids.size()), &n) == QKV_ERR_BUFFER_TOO_SMALL);
  CHECK(n == static_cast<int64_t>(expected.size()));
  CHECK(message_has(std::to_string(expected.size()).c_str()));
  for (int32_t id : ids) CHECK(id == -7);  // nothing written
  ids.assign(expected.size() + 3, -7);
  REQUIRE(qkv_tokenize(m, text, 1, ids.data(), static_cast<int64_t>(ids.size()), &n) == QKV_OK);
  REQUIRE(n == static_cast<int64_t>(expected.size()));
  CHECK(std::vector<int32_t>(ids.begin(), ids.begin() + n) == expected);
  CHECK(ids[n] == -7);
  CHECK(ids[0] == 1);  // BOS
  REQUIRE(qkv_tokenize(m, text, 0, ids.data(), static_cast<int64_t>(ids.size()), &n) == QKV_OK);
  CHECK(n == static_cast<int64_t>(expected.size()) - 1);
  CHECK(ids[0] == expected[1]);
  // Empty text without BOS needs no buffer at all.
  CHECK(qkv_tokenize(m, "", 0, nullptr, 0, &n) == QKV_OK);
  CHECK(n == 0);

  int64_t len = -1;
  CHECK(qkv_detokenize(m, expected.data(), static_cast<int64_t>(expected.size()), nullptr, 0, &len) ==
        QKV_ERR_BUFFER_TOO_SMALL);
  CHECK(len == static_cast<int64_t>(std::strlen(text)));
  std::vector<char> buf(static_cast<size_t>(len), 'x');  // one short: no room for the NUL
  CHECK(qkv_detokenize(m, expected.data(), static_cast<int64_t>(expected.size()), buf.data(), len, &len) ==
        QKV_ERR_BUFFER_TOO_SMALL);
  CHECK(message_has(std::to_string(len + 1).c_str()));
  CHECK(buf[0] == 'x');
  buf.assign(static_cast<size_t>(len) + 1, 'x');
  REQUIRE(qkv_detokenize(m, expected.data(), static_cast<int64_t>(expected.size()), buf.data(), len + 1, &len) ==
          QKV_OK);
  CHECK(std::string(buf.data()) == text);
  CHECK(qkv_detokenize(m, nullptr, 0, nullptr, 0, &len) == QKV_ERR_BUFFER_TOO_SMALL);  // "" still needs a NUL
  CHECK(len == 0);
  char one = 'x';
  CHECK(qkv_detokenize(m, nullptr, 0, &one, 1, &len) == QKV_OK);
  CHECK(one == '\0');
  const int32_t bad[2] = {5, 512};
  CHECK(qkv_detokenize(m, bad, 2, buf.data(), static_cast<int64_t>(buf.size()), &len) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(message_has("512"));
  qkv_model_free(m);
}

TEST_CASE("c api: context options are checked") {
  qkv_model* m = load_ok(synthetic_gguf());
  qkv_context* c = nullptr;
  qkv_context_options o = one_thread_options(64);
  CHECK(qkv_context_create(m, 0, &o, &c) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(c == nullptr);
  CHECK(message_has("at least one sequence"));
  o.context = -1;
  CHECK(qkv_context_create(m, 1, &o, &c) == QKV_ERR_INVALID_ARGUMENT);
  o = one_thread_options(64);
  o.threads = -2;
  CHECK(qkv_context_create(m, 1, &o, &c) == QKV_ERR_INVALID_ARGUMENT);
  o = one_thread_options(64);
  o.prefill_batch = -1;
  CHECK(qkv_context_create(m, 1, &o, &c) == QKV_ERR_INVALID_ARGUMENT);
  o = one_thread_options(64);
  // What a C caller can store in the enum (not a valid C++ qkv_type value, so
  // written as bytes).
  const int not_a_type = 42;
  std::memcpy(&o.kv_type, &not_a_type, sizeof not_a_type);
  CHECK(qkv_context_create(m, 1, &o, &c) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(message_has("element type"));
  o = one_thread_options(64);
  o.kv_type = QKV_TYPE_Q8_0;  // head_dim 16 is not a multiple of 32
  CHECK(qkv_context_create(m, 1, &o, &c) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(message_has("q8_0"));

  // Memory limit: the weights, the KV cache and the activations together; the
  // exact size passes, one byte less is out of memory.
  // KV: 2 layers x K,V x 3 seqs x 2 KV heads x 64 positions x 16 dims x 4 bytes.
  const uint64_t bytes = 2ull * 2 * 3 * 2 * 64 * 16 * 4;
  o = one_thread_options(64);
  const qkv::Model loaded = qkv::load_model(synthetic_gguf());
  qkv::DecoderOptions dopt;
  dopt.n_seqs = 3;
  dopt.prefill_batch = o.prefill_batch > 0 ? o.prefill_batch : dopt.prefill_batch;
  const uint64_t total = bytes + loaded.weight_bytes() + qkv::Decoder::activation_bytes(loaded.config, dopt);
  CHECK(total > bytes + loaded.weight_bytes());
  o.memory_limit = total - 1;
  CHECK(qkv_context_create(m, 3, &o, &c) == QKV_ERR_OUT_OF_MEMORY);
  CHECK(c == nullptr);
  CHECK(message_has("memory limit"));
  CHECK(message_has(("weights " + std::to_string(loaded.weight_bytes())).c_str()));
  CHECK(message_has(("KV cache " + std::to_string(bytes)).c_str()));
  o.memory_limit = bytes;  // the cache alone fits, the whole context does not
  CHECK(qkv_context_create(m, 3, &o, &c) == QKV_ERR_OUT_OF_MEMORY);
  o.memory_limit = total;
  REQUIRE(qkv_context_create(m, 3, &o, &c) == QKV_OK);
  CHECK(qkv_context_kv_bytes(c) == bytes);
  qkv_session* s = nullptr;
  CHECK(qkv_context_session(c, 3, &s) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(s == nullptr);
  CHECK(qkv_context_session(c, -1, &s) == QKV_ERR_INVALID_ARGUMENT);
  REQUIRE(qkv_context_session(c, 2, &s) == QKV_OK);
  CHECK(qkv_session_kv_bytes(s) == bytes);
  qkv_session_free(s);  // a slot: does nothing, the context still owns it
  int64_t pos = -1;
  CHECK(qkv_session_position(s, &pos) == QKV_OK);
  CHECK(pos == 0);
  qkv_context_free(c);

  // Defaults: the model's context, F16.
  qkv_session* d = nullptr;
  REQUIRE(qkv_session_create(m, nullptr, &d) == QKV_OK);
  CHECK(qkv_session_kv_bytes(d) == 2ull * 2 * 1 * 2 * 512 * 16 * 2);
  qkv_session_free(d);
  qkv_model_free(m);
}

TEST_CASE("c api: prefill and step logits equal the C++ decoder's") {
  qkv_model* m = load_ok(synthetic_gguf());
  const qkv::Model ref_model = qkv::load_model(synthetic_gguf());
  const int64_t vocab = ref_model.config.vocab_size;
  qkv::DecoderOptions dopt;
  dopt.context = 64;
  dopt.kv_type = qkv::DType::F32;
  qkv::Decoder dec(ref_model, dopt);

  qkv_context_options o = one_thread_options(64);
  qkv_session* s = nullptr;
  REQUIRE(qkv_session_create(m, &o, &s) == QKV_OK);
  const std::vector<int32_t> prompt = random_tokens(11, vocab, 1);
  std::vector<float> got(static_cast<size_t>(vocab));
  REQUIRE(qkv_session_prefill(s, prompt.data(), static_cast<int64_t>(prompt.size()), got.data(), vocab) == QKV_OK);

  // Same kernels, same inputs, same thread count: the logits agree to the bit
  // up to reassociation, so the bound is a few f32 ulps of the logit scale.
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const float* want = dec.prefill(0, prompt.data(), static_cast<int64_t>(prompt.size()));
  const double scale = max_abs(want, vocab);
  CHECK(scale > 0.1);
  CHECK(max_abs_diff(got.data(), want, vocab) <= 1e-6 * scale);
  int64_t pos = 0;
  REQUIRE(qkv_session_position(s, &pos) == QKV_OK);
  CHECK(pos == 11);

  for (int32_t token : random_tokens(5, vocab, 2)) {
    REQUIRE(qkv_session_step(s, token, got.data(), vocab) == QKV_OK);
    want = dec.step(0, token);
    CHECK(max_abs_diff(got.data(), want, vocab) <= 1e-6 * scale);
  }
  omp_set_num_threads(saved);
  REQUIRE(qkv_session_position(s, &pos) == QKV_OK);
  CHECK(pos == 16);
  // logits may be NULL.
  CHECK(qkv_session_step(s, 9, nullptr, 0) == QKV_OK);
  // The caller's OpenMP setting survives the call (the context runs 1 thread).
  CHECK(omp_get_max_threads() == saved);

  // A bad token id is an invalid argument, and changes nothing.
  CHECK(qkv_session_step(s, static_cast<int32_t>(vocab), got.data(), vocab) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(message_has("outside the vocabulary"));
  const int32_t negative = -1;
  CHECK(qkv_session_prefill(s, &negative, 1, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_session_prefill(s, prompt.data(), 0, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  REQUIRE(qkv_session_position(s, &pos) == QKV_OK);
  CHECK(pos == 17);
  qkv_session_free(s);
  qkv_model_free(m);
}

TEST_CASE("c api: a too-small logits buffer is BUFFER_TOO_SMALL with the size, before anything runs") {
  qkv_model* m = load_ok(synthetic_gguf());
  qkv_context* c = nullptr;
  qkv_context_options o = one_thread_options(32);
  REQUIRE(qkv_context_create(m, 2, &o, &c) == QKV_OK);
  qkv_session *a = nullptr, *b = nullptr;
  REQUIRE(qkv_context_session(c, 0, &a) == QKV_OK);
  REQUIRE(qkv_context_session(c, 1, &b) == QKV_OK);
  std::vector<float> logits(2 * 512, 0.0f);
  const int32_t tok[2] = {10, 11};
  int64_t pos = -1;

  CHECK(qkv_session_prefill(a, tok, 2, logits.data(), 511) == QKV_ERR_BUFFER_TOO_SMALL);
  CHECK(message_has("512"));
  REQUIRE(qkv_session_position(a, &pos) == QKV_OK);
  CHECK(pos == 0);
  CHECK(qkv_session_prefill(a, tok, 2, logits.data(), -5) == QKV_ERR_BUFFER_TOO_SMALL);
  CHECK(qkv_session_step(a, 10, logits.data(), 0) == QKV_ERR_BUFFER_TOO_SMALL);
  qkv_session* both[2] = {a, b};
  CHECK(qkv_step_batch(both, tok, 2, logits.data(), 1023) == QKV_ERR_BUFFER_TOO_SMALL);
  CHECK(message_has("1024"));
  REQUIRE(qkv_session_position(a, &pos) == QKV_OK);
  CHECK(pos == 0);
  REQUIRE(qkv_session_position(b, &pos) == QKV_OK);
  CHECK(pos == 0);
  CHECK(qkv_step_batch(both, tok, 2, logits.data(), 1024) == QKV_OK);
  qkv_context_free(c);
  qkv_model_free(m);
}

TEST_CASE("c api: context overflow is CONTEXT_OVERFLOW and leaves the session as it was") {
  qkv_model* m = load_ok(synthetic_gguf());
  qkv_context_options o = one_thread_options(8);
  qkv_session* s = nullptr;
  REQUIRE(qkv_session_create(m, &o, &s) == QKV_OK);
  const std::vector<int32_t> nine = random_tokens(9, 512, 3);
  int64_t pos = -1;
  CHECK(qkv_session_prefill(s, nine.data(), 9, nullptr, 0) == QKV_ERR_CONTEXT_OVERFLOW);
  CHECK(message_has("context"));
  REQUIRE(qkv_session_position(s, &pos) == QKV_OK);
  CHECK(pos == 0);
  REQUIRE(qkv_session_prefill(s, nine.data(), 6, nullptr, 0) == QKV_OK);
  CHECK(qkv_session_prefill(s, nine.data(), 3, nullptr, 0) == QKV_ERR_CONTEXT_OVERFLOW);
  REQUIRE(qkv_session_prefill(s, nine.data(), 2, nullptr, 0) == QKV_OK);
  CHECK(qkv_session_step(s, 5, nullptr, 0) == QKV_ERR_CONTEXT_OVERFLOW);
  REQUIRE(qkv_session_position(s, &pos) == QKV_OK);
  CHECK(pos == 8);
  // A prompt longer than the room left: generate refuses before running.
  REQUIRE(qkv_session_truncate(s, 0) == QKV_OK);
  qkv_generate_options g;
  qkv_generate_options_init(&g);
  g.sampler.temperature = 0;
  CHECK(qkv_generate(s, "a prompt of many more than eight bytes", &g, nullptr, nullptr, nullptr) ==
        QKV_ERR_CONTEXT_OVERFLOW);
  REQUIRE(qkv_session_position(s, &pos) == QKV_OK);
  CHECK(pos == 0);
  // Generation fills the context and stops there.
  qkv_generate_stats st;
  REQUIRE(qkv_generate(s, "ab", &g, nullptr, nullptr, &st) == QKV_OK);
  int64_t n_prompt = 0;
  REQUIRE(qkv_tokenize(m, "ab", 1, nullptr, 0, &n_prompt) == QKV_ERR_BUFFER_TOO_SMALL);
  CHECK(st.prompt_tokens == n_prompt);
  CHECK(st.forward_passes >= n_prompt);
  CHECK(st.forward_passes <= 8);
  REQUIRE(qkv_session_position(s, &pos) == QKV_OK);
  CHECK(pos == st.forward_passes);
  qkv_session_free(s);
  qkv_model_free(m);
}

TEST_CASE("c api: batched step equals stepping each session alone, across contexts is refused") {
  qkv_model* m = load_ok(synthetic_gguf());
  const int64_t vocab = 512, n = 3;
  qkv_context_options o = one_thread_options(48);
  qkv_context* c = nullptr;
  REQUIRE(qkv_context_create(m, n, &o, &c) == QKV_OK);
  std::vector<qkv_session*> slots(n), alone(n);
  for (int64_t i = 0; i < n; ++i) {
    REQUIRE(qkv_context_session(c, i, &slots[i]) == QKV_OK);
    REQUIRE(qkv_session_create(m, &o, &alone[i]) == QKV_OK);
    // Prompts of different lengths, so the batch mixes positions.
    const std::vector<int32_t> p = random_tokens(static_cast<size_t>(3 + 5 * i), vocab, 10 + uint32_t(i));
    REQUIRE(qkv_session_prefill(slots[i], p.data(), static_cast<int64_t>(p.size()), nullptr, 0) == QKV_OK);
    REQUIRE(qkv_session_prefill(alone[i], p.data(), static_cast<int64_t>(p.size()), nullptr, 0) == QKV_OK);
  }
  std::vector<float> batched(static_cast<size_t>(n * vocab)), single(static_cast<size_t>(vocab));
  for (int step = 0; step < 4; ++step) {
    const std::vector<int32_t> toks = random_tokens(static_cast<size_t>(n), vocab, 100 + uint32_t(step));
    REQUIRE(qkv_step_batch(slots.data(), toks.data(), n, batched.data(), n * vocab) == QKV_OK);
    for (int64_t i = 0; i < n; ++i) {
      REQUIRE(qkv_session_step(alone[i], toks[i], single.data(), vocab) == QKV_OK);
      // Batched rows go through a GEMM, single rows through a matvec: the same
      // f32 products summed in another order. Over dim 64 / hidden 172 dot
      // products through 2 layers that is a few f32 ulps of the logit scale
      // (measured ~6e-7 relative); 1e-5 leaves a margin of 15.
      const float* row = batched.data() + i * vocab;
      CAPTURE(step);
      CAPTURE(i);
      CHECK(max_abs_diff(row, single.data(), vocab) <= 1e-5 * max_abs(single.data(), vocab));
      // Each slot samples from its own row.
      int32_t t_batch = -1, t_single = -2;
      REQUIRE(qkv_session_sample(slots[i], &t_batch) == QKV_OK);
      REQUIRE(qkv_session_sample(alone[i], &t_single) == QKV_OK);
      CHECK(t_batch == t_single);
    }
  }

  // Refused, and nothing runs: sessions of two contexts, a slot twice, too many.
  int64_t pos_before = 0, pos_after = 0;
  REQUIRE(qkv_session_position(slots[0], &pos_before) == QKV_OK);
  const int32_t toks[4] = {5, 6, 7, 8};
  qkv_session* mixed[2] = {slots[0], alone[1]};
  CHECK(qkv_step_batch(mixed, toks, 2, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(message_has("different contexts"));
  qkv_session* twice[2] = {slots[1], slots[1]};
  CHECK(qkv_step_batch(twice, toks, 2, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  qkv_session* four[4] = {slots[0], slots[1], slots[2], slots[0]};
  CHECK(qkv_step_batch(four, toks, 4, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_step_batch(slots.data(), toks, 0, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  REQUIRE(qkv_session_position(slots[0], &pos_after) == QKV_OK);
  CHECK(pos_after == pos_before);

  // One slot at the end of its context stops the whole batch before it runs.
  qkv_context_options tiny = one_thread_options(4);
  qkv_context* small = nullptr;
  REQUIRE(qkv_context_create(m, 2, &tiny, &small) == QKV_OK);
  qkv_session *x = nullptr, *y = nullptr;
  REQUIRE(qkv_context_session(small, 0, &x) == QKV_OK);
  REQUIRE(qkv_context_session(small, 1, &y) == QKV_OK);
  REQUIRE(qkv_session_prefill(x, toks, 4, nullptr, 0) == QKV_OK);
  qkv_session* xy[2] = {y, x};
  CHECK(qkv_step_batch(xy, toks, 2, nullptr, 0) == QKV_ERR_CONTEXT_OVERFLOW);
  REQUIRE(qkv_session_position(y, &pos_after) == QKV_OK);
  CHECK(pos_after == 0);
  qkv_context_free(small);

  qkv_context_free(c);
  for (qkv_session* s : alone) qkv_session_free(s);
  qkv_model_free(m);
}

TEST_CASE("c api: truncate rewinds a session exactly") {
  qkv_model* m = load_ok(synthetic_gguf());
  qkv_context_options o = one_thread_options(32);
  qkv_session* s = nullptr;
  REQUIRE(qkv_session_create(m, &o, &s) == QKV_OK);
  const std::vector<int32_t> t = random_tokens(7, 512, 5);
  std::vector<float> fresh(512), again(512);
  REQUIRE(qkv_session_prefill(s, t.data(), 4, fresh.data(), 512) == QKV_OK);
  REQUIRE(qkv_session_prefill(s, t.data() + 4, 3, nullptr, 0) == QKV_OK);
  CHECK(qkv_session_truncate(s, 8) == QKV_ERR_INVALID_ARGUMENT);  // beyond its 7 positions
  CHECK(qkv_session_truncate(s, -1) == QKV_ERR_INVALID_ARGUMENT);
  REQUIRE(qkv_session_truncate(s, 3) == QKV_OK);
  int64_t pos = -1;
  REQUIRE(qkv_session_position(s, &pos) == QKV_OK);
  CHECK(pos == 3);
  int32_t tok = 0;
  CHECK(qkv_session_sample(s, &tok) == QKV_ERR_INVALID_ARGUMENT);  // truncate leaves no logits
  CHECK(message_has("no logits"));
  REQUIRE(qkv_session_step(s, t[3], again.data(), 512) == QKV_OK);
  // Position 3 recomputed by a step rather than inside a 4-token prefill: same
  // values, summed in another order (matvec vs GEMM); see the batched test.
  CHECK(max_abs_diff(fresh.data(), again.data(), 512) <= 1e-5 * max_abs(fresh.data(), 512));
  REQUIRE(qkv_session_truncate(s, 0) == QKV_OK);
  REQUIRE(qkv_session_position(s, &pos) == QKV_OK);
  CHECK(pos == 0);
  qkv_session_free(s);
  qkv_model_free(m);
}

TEST_CASE("c api: sampling") {
  qkv_model* m = load_ok(synthetic_gguf());
  qkv_context_options o = one_thread_options(32);
  qkv_session *a = nullptr, *b = nullptr;
  REQUIRE(qkv_session_create(m, &o, &a) == QKV_OK);
  REQUIRE(qkv_session_create(m, &o, &b) == QKV_OK);
  int32_t tok = 0;
  CHECK(qkv_session_sample(a, &tok) == QKV_ERR_INVALID_ARGUMENT);  // nothing run yet

  qkv_sampler_options so;
  qkv_sampler_options_init(&so);
  CHECK(so.temperature == doctest::Approx(0.8f));
  CHECK(so.top_k == 40);
  so.top_p = 0.0f;
  CHECK(qkv_session_set_sampler(a, &so) == QKV_ERR_INVALID_ARGUMENT);
  qkv_sampler_options_init(&so);
  so.temperature = NAN;
  CHECK(qkv_session_set_sampler(a, &so) == QKV_ERR_INVALID_ARGUMENT);

  // Greedy: the argmax of the logits.
  std::vector<float> logits(512);
  const std::vector<int32_t> p = random_tokens(5, 512, 8);
  REQUIRE(qkv_session_prefill(a, p.data(), 5, logits.data(), 512) == QKV_OK);
  qkv_sampler_options_init(&so);
  so.temperature = 0;
  REQUIRE(qkv_session_set_sampler(a, &so) == QKV_OK);
  REQUIRE(qkv_session_sample(a, &tok) == QKV_OK);
  CHECK(tok == static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));

  // Seeded: two sessions with the same seed draw the same tokens; sampling
  // does not consume the logits.
  REQUIRE(qkv_session_prefill(b, p.data(), 5, nullptr, 0) == QKV_OK);
  qkv_sampler_options_init(&so);
  so.temperature = 1.5f;
  so.top_k = 0;
  so.top_p = 1.0f;
  so.min_p = 0.0f;
  so.seed = 42;
  REQUIRE(qkv_session_set_sampler(a, &so) == QKV_OK);
  REQUIRE(qkv_session_set_sampler(b, &so) == QKV_OK);
  std::vector<int32_t> da, db;
  for (int i = 0; i < 20; ++i) {
    int32_t x = -1, y = -1;
    REQUIRE(qkv_session_sample(a, &x) == QKV_OK);
    REQUIRE(qkv_session_sample(b, &y) == QKV_OK);
    CHECK(x >= 0);
    CHECK(x < 512);
    da.push_back(x);
    db.push_back(y);
  }
  CHECK(da == db);
  CHECK(std::count(da.begin(), da.end(), da[0]) < 20);  // at temperature 1.5 the draws vary
  qkv_session_free(a);
  qkv_session_free(b);
  qkv_model_free(m);
}

namespace {
struct Collected {
  std::string text;
  int pieces = 0;
  int stop_after = -1;
};
int collect(const char* piece, size_t length, void* user) {
  auto* c = static_cast<Collected*>(user);
  c->text.append(piece, length);
  ++c->pieces;
  return c->stop_after >= 0 && c->pieces >= c->stop_after;
}
}  // namespace

TEST_CASE("c api: generate matches llama2.c's greedy output; the callback can stop it") {
  if (!qkv::test::have_shared("models/stories260K.bin") || !qkv::test::have_shared("models/tok512.bin") ||
      !qkv::test::have_shared("reference/stories260K-greedy.txt")) {
    return;
  }
  // The reference block for "Once upon a time" (256 steps) ends with llama2.c's
  // newline plus one of the file's own (see tests/run_reference.sh).
  const std::string ref = read_all(qkv::test::shared_path("reference/stories260K-greedy.txt"));
  const std::string head = "=== prompt: Once upon a time\n";
  const size_t start = ref.find(head);
  REQUIRE(start != std::string::npos);
  const size_t end = ref.find("=== end", start);
  const std::string expected = ref.substr(start + head.size(), end - start - head.size() - 2);

  const std::string tok = qkv::test::shared_path("models/tok512.bin");
  qkv_model* m = load_ok(qkv::test::shared_path("models/stories260K.bin"), tok.c_str());
  qkv_session* s = nullptr;
  REQUIRE(qkv_session_create(m, nullptr, &s) == QKV_OK);
  qkv_generate_options g;
  qkv_generate_options_init(&g);
  g.steps = 256;
  g.sampler.temperature = 0;
  Collected out;
  qkv_generate_stats st;
  REQUIRE(qkv_generate(s, "Once upon a time", &g, collect, &out, &st) == QKV_OK);
  CHECK(out.text == expected);
  CHECK(std::string(st.stop_reason) == "steps");
  CHECK(st.forward_passes == 256);
  int64_t pos = 0;
  REQUIRE(qkv_session_position(s, &pos) == QKV_OK);
  CHECK(pos == 256);
  int32_t t = 0;
  CHECK(qkv_session_sample(s, &t) == QKV_ERR_INVALID_ARGUMENT);  // generate leaves no logits

  REQUIRE(qkv_session_truncate(s, 0) == QKV_OK);
  Collected stopped;
  stopped.stop_after = 5;
  REQUIRE(qkv_generate(s, "Once upon a time", &g, collect, &stopped, &st) == QKV_OK);
  CHECK(std::string(st.stop_reason) == "stopped");
  CHECK(stopped.pieces == 5);
  CHECK(expected.compare(0, stopped.text.size(), stopped.text) == 0);

  g.steps = -1;
  CHECK(qkv_generate(s, "x", &g, nullptr, nullptr, nullptr) == QKV_ERR_INVALID_ARGUMENT);
  qkv_session_free(s);
  qkv_model_free(m);
}

TEST_CASE("c api: the last error is per thread and survives successful calls") {
  qkv_model* m = nullptr;
  CHECK(qkv_model_load("/nonexistent/x.gguf", nullptr, &m) == QKV_ERR_IO);
  const std::string msg = qkv_last_error();
  CHECK(msg.find("/nonexistent/x.gguf") != std::string::npos);
  qkv_model_info info;
  m = load_ok(synthetic_gguf());
  CHECK(qkv_model_get_info(m, &info) == QKV_OK);
  CHECK(msg == qkv_last_error());
  qkv_model_free(m);
}

// ---- bare attention ----

namespace {

// out = softmax(q·kᵀ·scale + mask)·v in fp64, straight from the definition,
// over K/V already decoded to floats. Layouts as in qkv_attention.
std::vector<double> attention_direct(const qkv_attention_params& p, const std::vector<float>& q,
                                     const std::vector<float>& k, const std::vector<float>& v) {
  const int64_t B = p.batch, Hq = p.q_heads, Hkv = p.kv_heads, Lq = p.q_len, Lk = p.kv_len, d = p.head_dim;
  const double scale = p.scale != 0 ? p.scale : 1.0 / std::sqrt(double(d));
  std::vector<double> out(static_cast<size_t>(B * Hq * Lq * d), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kh = h / (Hq / Hkv);
      for (int64_t i = 0; i < Lq; ++i) {
        const int64_t qpos = p.q_pos0 + i;
        std::vector<double> s(static_cast<size_t>(Lk), -INFINITY);
        double mx = -INFINITY;
        for (int64_t j = 0; j < Lk; ++j) {
          if (p.causal && j > qpos) continue;
          if (p.window > 0 && (j <= qpos - p.window || (!p.causal && j >= qpos + p.window))) continue;
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) {
            dot += double(q[((b * Hq + h) * Lq + i) * d + c]) * double(k[((b * Hkv + kh) * Lk + j) * d + c]);
          }
          s[j] = dot * scale + (p.additive_mask ? double(p.additive_mask[i * Lk + j]) : 0.0);
          mx = std::fmax(mx, s[j]);
        }
        if (mx == -INFINITY) continue;  // no visible key: zeros
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (int64_t j = 0; j < Lk; ++j) {
          for (int64_t c = 0; c < d; ++c) {
            out[((b * Hq + h) * Lq + i) * d + c] += s[j] / sum * double(v[((b * Hkv + kh) * Lk + j) * d + c]);
          }
        }
      }
    }
  }
  return out;
}

// Encodes rows of d floats as type t; `decoded` gets what the kernel will see.
std::vector<uint8_t> encode_rows(qkv::DType t, const std::vector<float>& x, int64_t d, std::vector<float>& decoded) {
  const size_t rows = x.size() / static_cast<size_t>(d), rb = qkv::dtype_row_bytes(t, static_cast<size_t>(d));
  std::vector<uint8_t> out(rows * rb);
  decoded.resize(x.size());
  for (size_t r = 0; r < rows; ++r) {
    qkv::encode_row(t, &x[r * d], static_cast<size_t>(d), &out[r * rb]);
    qkv::decode_row(t, &out[r * rb], static_cast<size_t>(d), &decoded[r * d]);
  }
  return out;
}

}  // namespace

TEST_CASE("c api: qkv_attention equals a direct fp64 computation") {
  struct Case {
    const char* name;
    int64_t B, Hq, Hkv, Lq, Lk, d;
    int causal;
    int64_t q_pos0, window;
    bool mask;
    float scale;
  };
  const Case cases[] = {
      {"GQA prefill, causal", 2, 8, 2, 9, 9, 32, 1, 0, 0, false, 0},
      {"decode against a longer cache", 1, 4, 4, 1, 70, 64, 1, 69, 0, false, 0},
      {"MQA chunk at an offset, window", 2, 6, 1, 5, 40, 32, 1, 35, 8, false, 0.3f},
      {"bidirectional with an additive mask", 1, 4, 2, 6, 13, 32, 0, 0, 0, true, 0},
      {"every key masked for early rows", 1, 2, 1, 4, 6, 32, 1, 0, 0, true, 0},
  };
  const qkv_type types[] = {QKV_TYPE_F32, QKV_TYPE_F16, QKV_TYPE_BF16, QKV_TYPE_Q8_0};
  for (const Case& c : cases) {
    for (qkv_type kt : types) {
      CAPTURE(c.name);
      CAPTURE(int(kt));
      qkv_attention_params p;
      qkv_attention_params_init(&p);
      p.batch = c.B;
      p.q_heads = c.Hq;
      p.kv_heads = c.Hkv;
      p.q_len = c.Lq;
      p.kv_len = c.Lk;
      p.head_dim = c.d;
      p.causal = c.causal;
      p.q_pos0 = c.q_pos0;
      p.window = c.window;
      p.scale = c.scale;
      p.threads = 2;
      std::mt19937 rng(static_cast<uint32_t>(c.Lk * 7 + int(kt)));
      std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
      std::vector<float> q(static_cast<size_t>(c.B * c.Hq * c.Lq * c.d));
      std::vector<float> k(static_cast<size_t>(c.B * c.Hkv * c.Lk * c.d)), v(k.size());
      for (float& x : q) x = dist(rng);
      for (float& x : k) x = dist(rng);
      for (float& x : v) x = dist(rng);
      std::vector<float> mask;
      if (c.mask) {
        mask.resize(static_cast<size_t>(c.Lq * c.Lk));
        for (int64_t i = 0; i < c.Lq; ++i) {
          for (int64_t j = 0; j < c.Lk; ++j) {
            // The last case masks all keys of query rows 0 and 1.
            const bool all = std::string(c.name).find("every key") != std::string::npos && i < 2;
            mask[i * c.Lk + j] = all || (i + j) % 3 == 0 ? -INFINITY : dist(rng);
          }
        }
        p.additive_mask = mask.data();
      }
      std::vector<float> kd, vd;
      const std::vector<uint8_t> kb = encode_rows(static_cast<qkv::DType>(kt), k, c.d, kd);
      const std::vector<uint8_t> vb = encode_rows(static_cast<qkv::DType>(kt), v, c.d, vd);
      std::vector<float> out(q.size(), NAN);
      REQUIRE(qkv_attention(&p, q.data(), kb.data(), vb.data(), kt, out.data()) == QKV_OK);
      const std::vector<double> want = attention_direct(p, q, kd, vd);
      // K/V are compared after their own rounding (decoded), so what is left is
      // the kernel's f32 arithmetic: scores over d <= 64 products of |x| <= 2
      // and a softmax-weighted sum of |v| <= 2. Its error bound is ~d ulps of
      // the largest score (~1e-5 relative to |out| <= 2); measured <= 1.3e-6.
      // Q8_0 decode on VNNI CPUs quantizes the query first (tests/q8_query.h):
      // there the output must match the reference on that quantized query.
      auto worst_diff = [&](const std::vector<double>& ref) {
        double worst = 0;
        for (size_t i = 0; i < out.size(); ++i) worst = std::fmax(worst, std::fabs(out[i] - ref[i]));
        return worst;
      };
      double worst = worst_diff(want);
      if (kt == QKV_TYPE_Q8_0) {
        std::vector<float> qq(q);
        const float scale = c.scale != 0.0f ? c.scale : 1.0f / std::sqrt(static_cast<float>(c.d));
        for (size_t r = 0; r < qq.size(); r += static_cast<size_t>(c.d)) {
          qkv::testing::quantize_query_like_q8_decode(&qq[r], c.d, scale);
        }
        worst = std::fmin(worst, worst_diff(attention_direct(p, qq, kd, vd)));
      }
      CHECK(worst <= 2e-5);
    }
  }
}

TEST_CASE("c api: qkv_attention rejects impossible shapes") {
  float buf[64] = {};
  qkv_attention_params p;
  qkv_attention_params_init(&p);
  CHECK(qkv_attention(&p, buf, buf, buf, QKV_TYPE_F32, buf) == QKV_OK);
  p.q_heads = 3;
  p.kv_heads = 2;
  CHECK(qkv_attention(&p, buf, buf, buf, QKV_TYPE_F32, buf) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(message_has("multiple"));
  qkv_attention_params_init(&p);
  p.head_dim = 0;
  CHECK(qkv_attention(&p, buf, buf, buf, QKV_TYPE_F32, buf) == QKV_ERR_INVALID_ARGUMENT);
  qkv_attention_params_init(&p);
  p.kv_len = -1;
  CHECK(qkv_attention(&p, buf, buf, buf, QKV_TYPE_F32, buf) == QKV_ERR_INVALID_ARGUMENT);
  qkv_attention_params_init(&p);
  p.head_dim = 16;
  CHECK(qkv_attention(&p, buf, buf, buf, QKV_TYPE_Q8_0, buf) == QKV_ERR_INVALID_ARGUMENT);
  qkv_attention_params_init(&p);
  p.window = -1;
  CHECK(qkv_attention(&p, buf, buf, buf, QKV_TYPE_F32, buf) == QKV_ERR_INVALID_ARGUMENT);
  qkv_attention_params_init(&p);
  p.batch = INT64_C(1) << 40;
  p.q_len = INT64_C(1) << 20;
  p.head_dim = 1 << 10;
  CHECK(qkv_attention(&p, buf, buf, buf, QKV_TYPE_F32, buf) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(message_has("overflow"));
  // No key at all: zeros, not NaN.
  qkv_attention_params_init(&p);
  p.kv_len = 0;
  buf[0] = NAN;
  CHECK(qkv_attention(&p, buf + 1, buf + 1, buf + 1, QKV_TYPE_F32, buf) == QKV_OK);
  CHECK(buf[0] == 0.0f);
}
