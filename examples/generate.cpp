// The same generation through the same C header from C++: RAII handles around
// the C API's opaque pointers, and a lambda as the streaming callback.
//   generate_cpp MODEL TOKENIZER|- PROMPT [STEPS]
#include <qkv.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

namespace {

void check(qkv_status st, const char* what) {
  if (st != QKV_OK) throw std::runtime_error(std::string(what) + ": " + qkv_last_error());
}

struct ModelDeleter {
  void operator()(qkv_model* m) const { qkv_model_free(m); }
};
struct SessionDeleter {
  void operator()(qkv_session* s) const { qkv_session_free(s); }
};

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL TOKENIZER|- PROMPT [STEPS]\n", argv[0]);
    return 2;
  }
  qkv_model_options mopts;
  qkv_model_options_init(&mopts);
  const std::string tok = argv[2];
  if (tok != "-") mopts.tokenizer_path = argv[2];

  qkv_model* raw_model = nullptr;
  check(qkv_model_load(argv[1], &mopts, &raw_model), "load");
  std::unique_ptr<qkv_model, ModelDeleter> model(raw_model);

  qkv_session* raw_session = nullptr;
  check(qkv_session_create(model.get(), nullptr, &raw_session), "session");
  std::unique_ptr<qkv_session, SessionDeleter> session(raw_session);

  qkv_generate_options gopts;
  qkv_generate_options_init(&gopts);
  gopts.steps = argc > 4 ? std::stoll(argv[4]) : 64;
  gopts.sampler.temperature = 0.0f;
  std::string text;
  auto on_piece = [](const char* piece, size_t length, void* user) -> int {
    static_cast<std::string*>(user)->append(piece, length);
    return 0;
  };
  check(qkv_generate(session.get(), argv[3], &gopts, on_piece, &text, nullptr), "generate");
  std::printf("%s\n", text.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
