/* Loads a model through libqkv's C API and generates text from a prompt.
 *   generate MODEL TOKENIZER|- PROMPT [STEPS]
 * TOKENIZER is a llama2.c tokenizer.bin, or "-" for a GGUF model's own
 * vocabulary. STEPS counts every position, BOS and prompt included (llama2.c's
 * -n; default 64). Greedy (temperature 0) so the output is reproducible: the
 * text goes to stdout exactly as `qkv run --temp 0 --steps STEPS` prints it. */
#include <stdio.h>
#include <stdlib.h>

#include <qkv.h>

static int print_piece(const char* piece, size_t length, void* user) {
  (void)user;
  fwrite(piece, 1, length, stdout);
  fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MODEL TOKENIZER|- PROMPT [STEPS]\n", argv[0]);
    return 2;
  }
  qkv_model_options mopts;
  qkv_model_options_init(&mopts);
  if (argv[2][0] != '-' || argv[2][1] != '\0') mopts.tokenizer_path = argv[2];

  qkv_model* model = NULL;
  const qkv_status loaded = qkv_model_load(argv[1], &mopts, &model);
  if (loaded != QKV_OK) {
    fprintf(stderr, "load failed (%s): %s\n", qkv_status_name(loaded), qkv_last_error());
    return 1;
  }
  qkv_session* session = NULL;
  if (qkv_session_create(model, NULL, &session) != QKV_OK) {
    fprintf(stderr, "session failed: %s\n", qkv_last_error());
    qkv_model_free(model);
    return 1;
  }
  qkv_generate_options gopts;
  qkv_generate_options_init(&gopts);
  gopts.steps = 64;
  if (argc > 4) {
    char* end = NULL;
    gopts.steps = strtoll(argv[4], &end, 10);
    if (*argv[4] == '\0' || *end != '\0' || gopts.steps < 1) {
      fprintf(stderr, "STEPS must be a positive integer, not '%s'\n", argv[4]);
      qkv_session_free(session);
      qkv_model_free(model);
      return 2;
    }
  }
  gopts.sampler.temperature = 0.0f;
  qkv_generate_stats stats;
  const qkv_status st = qkv_generate(session, argv[3], &gopts, print_piece, NULL, &stats);
  printf("\n");
  if (st != QKV_OK) fprintf(stderr, "generate failed: %s\n", qkv_last_error());
  else fprintf(stderr, "%lld tokens, stop: %s\n", (long long)stats.generated_tokens, stats.stop_reason);
  qkv_session_free(session);
  qkv_model_free(model);
  return st == QKV_OK ? 0 : 1;
}
