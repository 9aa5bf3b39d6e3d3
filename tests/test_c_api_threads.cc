// ctest-labels: tsan
// One model shared by sessions running on several threads at once: each thread
// has its own session and gets exactly the tokens and logits it gets when the
// sessions run one after another. CI builds this with -DQKV_TSAN=ON and runs
// `ctest -L tsan`, so any data race on the shared model (weights, tokenizer,
// kernel dispatch, the GEMM primitive cache) is reported by ThreadSanitizer.
//
// Every session runs with threads = 1: libgomp is not built with TSan, so an
// OpenMP team's own synchronization would be invisible to it and show up as
// false races. One thread per session keeps OpenMP out of the picture.
#include <doctest/doctest.h>
#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "qkv.h"
#include "runtime/synthetic.h"
#include "tests/shared_data.h"

namespace {

constexpr int kThreads = 4;

struct Run {
  std::vector<int32_t> tokens;  // greedy choices, in order
  std::vector<float> last_logits;
  std::string error;            // empty when every call succeeded
};

// Prefills a prompt, then greedily samples and steps `steps` times on a fresh
// session of `model`, through the C API only.
Run greedy_run(qkv_model* model, const std::vector<int32_t>& prompt, int steps, int64_t vocab) {
  Run r;
  auto fail = [&](const char* what) { r.error = std::string(what) + ": " + qkv_last_error(); };
  qkv_context_options o;
  qkv_context_options_init(&o);
  o.threads = 1;
  o.context = 128;
  qkv_session* s = nullptr;
  if (qkv_session_create(model, &o, &s) != QKV_OK) {
    fail("create");
    return r;
  }
  qkv_sampler_options so;
  qkv_sampler_options_init(&so);
  so.temperature = 0;
  r.last_logits.resize(static_cast<size_t>(vocab));
  if (qkv_session_set_sampler(s, &so) != QKV_OK) {
    fail("sampler");
  } else if (qkv_session_prefill(s, prompt.data(), static_cast<int64_t>(prompt.size()), r.last_logits.data(),
                                 vocab) != QKV_OK) {
    fail("prefill");
  } else {
    for (int i = 0; i < steps; ++i) {
      int32_t t = -1;
      if (qkv_session_sample(s, &t) != QKV_OK) {
        fail("sample");
        break;
      }
      r.tokens.push_back(t);
      if (qkv_session_step(s, t, r.last_logits.data(), vocab) != QKV_OK) {
        fail("step");
        break;
      }
    }
  }
  qkv_session_free(s);
  return r;
}

std::vector<int32_t> prompt_for(int i, int64_t vocab) {
  std::mt19937 rng(static_cast<uint32_t>(1000 + i));
  std::uniform_int_distribution<int32_t> dist(3, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> p(static_cast<size_t>(5 + 7 * i));  // different lengths: different positions
  for (auto& t : p) t = dist(rng);
  return p;
}

}  // namespace

TEST_CASE("c api threads: sessions on one model from several threads equal sequential runs") {
  const std::string path = std::string(QKV_BINARY_DIR) + "/test_c_api_threads." + std::to_string(::getpid()) + ".gguf";
  // The synthetic "tiny" preset: GQA (4 query / 2 KV heads), vocab 512. Its
  // weights are filled by an OpenMP loop: on one thread, for the reason above.
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(1);
  qkv::write_gguf_model(qkv::make_synthetic_model(qkv::synthetic_preset("tiny"), qkv::DType::F16, 11), path);
  omp_set_num_threads(saved_threads);
  qkv_model* model = nullptr;
  const qkv_status st = qkv_model_load(path.c_str(), nullptr, &model);
  std::remove(path.c_str());  // the weights stay mapped
  INFO(qkv_last_error());
  REQUIRE(st == QKV_OK);
  qkv_model_info info;
  REQUIRE(qkv_model_get_info(model, &info) == QKV_OK);
  const int steps = 24;

  std::vector<Run> sequential;
  for (int i = 0; i < kThreads; ++i) sequential.push_back(greedy_run(model, prompt_for(i, info.vocab_size), steps, info.vocab_size));

  std::vector<Run> concurrent(kThreads);
  std::vector<std::thread> workers;
  for (int i = 0; i < kThreads; ++i) {
    workers.emplace_back([&, i] { concurrent[i] = greedy_run(model, prompt_for(i, info.vocab_size), steps, info.vocab_size); });
  }
  for (std::thread& t : workers) t.join();

  for (int i = 0; i < kThreads; ++i) {
    CAPTURE(i);
    CHECK(sequential[i].error == "");
    CHECK(concurrent[i].error == "");
    CHECK(sequential[i].tokens.size() == static_cast<size_t>(steps));
    // Same kernels, same inputs, one thread each: bit-identical.
    CHECK(concurrent[i].tokens == sequential[i].tokens);
    CHECK(concurrent[i].last_logits == sequential[i].last_logits);
  }
  // Different prompts led somewhere different (the comparison above is not trivially true).
  CHECK(sequential[0].last_logits != sequential[1].last_logits);
  qkv_model_free(model);
}

TEST_CASE("c api threads: each thread has its own last error") {
  std::vector<std::string> seen(kThreads);
  std::vector<std::thread> workers;
  for (int i = 0; i < kThreads; ++i) {
    workers.emplace_back([&, i] {
      const std::string path = "/nonexistent/model-" + std::to_string(i) + ".gguf";
      for (int k = 0; k < 50; ++k) {
        qkv_model* m = nullptr;
        if (qkv_model_load(path.c_str(), nullptr, &m) != QKV_ERR_IO || m != nullptr) {
          seen[i] = "wrong status";
          return;
        }
        if (std::strstr(qkv_last_error(), path.c_str()) == nullptr) {
          seen[i] = std::string("foreign message: ") + qkv_last_error();
          return;
        }
      }
      seen[i] = "ok";
    });
  }
  for (std::thread& t : workers) t.join();
  for (int i = 0; i < kThreads; ++i) CHECK(seen[i] == "ok");
}

TEST_CASE("c api threads: generation on a shared real model from several threads") {
  if (!qkv::test::have_shared("models/stories260K.bin") || !qkv::test::have_shared("models/tok512.bin")) return;
  const std::string model_path = qkv::test::shared_path("models/stories260K.bin");
  const std::string tok_path = qkv::test::shared_path("models/tok512.bin");
  qkv_model_options mo;
  qkv_model_options_init(&mo);
  mo.tokenizer_path = tok_path.c_str();
  qkv_model* model = nullptr;
  REQUIRE(qkv_model_load(model_path.c_str(), &mo, &model) == QKV_OK);
  const char* prompts[kThreads] = {"Once upon a time", "The cat sat on the mat", "Lily and Tom went to the park",
                                   "One day"};

  auto generate = [&](const char* prompt) {
    qkv_context_options o;
    qkv_context_options_init(&o);
    o.threads = 1;
    qkv_session* s = nullptr;
    if (qkv_session_create(model, &o, &s) != QKV_OK) return std::string("create: ") + qkv_last_error();
    qkv_generate_options g;
    qkv_generate_options_init(&g);
    g.steps = 96;
    g.sampler.temperature = 0;
    std::string text;
    auto append = [](const char* piece, size_t length, void* user) -> int {
      static_cast<std::string*>(user)->append(piece, length);
      return 0;
    };
    const qkv_status st = qkv_generate(s, prompt, &g, append, &text, nullptr);
    if (st != QKV_OK) text = std::string("generate: ") + qkv_last_error();
    qkv_session_free(s);
    return text;
  };

  std::vector<std::string> sequential, concurrent(kThreads);
  for (const char* p : prompts) sequential.push_back(generate(p));
  std::vector<std::thread> workers;
  for (int i = 0; i < kThreads; ++i) workers.emplace_back([&, i] { concurrent[i] = generate(prompts[i]); });
  for (std::thread& t : workers) t.join();
  for (int i = 0; i < kThreads; ++i) {
    CAPTURE(prompts[i]);
    CHECK(sequential[i].rfind(prompts[i], 0) == 0);  // the prompt is echoed, then the story
    CHECK(sequential[i].size() > std::strlen(prompts[i]) + 100);
    CHECK(concurrent[i] == sequential[i]);
  }
  qkv_model_free(model);
}
