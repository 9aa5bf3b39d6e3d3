// qkv serve's speculative decoding flags (llama-server's spellings: -md,
// --draft-max, --draft-min, --draft-p-min, --spec-type ngram,
// --spec-ngram-size, -cd) and a request's own settings ("speculative",
// "speculative.n_max", "speculative.n_min", "speculative.p_min", as
// llama-server's /completion takes them).
#pragma once

#include <cstdint>
#include <string>

namespace qkv::serve {

struct SpeculativeServe {
  std::string draft_path;      // -md: a draft model of the target's vocabulary
  bool ngram = false;          // --spec-type ngram: prompt lookup
  int64_t ngram_size = 3;      // --spec-ngram-size
  int64_t draft_max = 16;      // --draft-max: tokens drafted per verify pass
  int64_t draft_min = 0;       // --draft-min: fewer drafted tokens run a plain step
  float p_min = 0.75f;         // --draft-p-min: the draft model stops before a less likely token
  int64_t draft_context = 0;   // -cd: positions per slot of the draft's cache; 0: the slots' (at most the draft model's)
  bool enabled() const { return ngram || !draft_path.empty(); }
};

// A request's settings; -1 (or NaN for p_min): the server's.
struct SpeculativeRequest {
  bool enabled = true;  // "speculative": false turns it off
  int64_t n_max = -1, n_min = -1;
  double p_min = -1;
};

extern const char* const kSpeculativeUsage;

// When argv[i] is one of the flags: reads it (and its value, advancing i),
// failing (qkv::Error) on a bad value, and returns true.
bool parse_speculative_flag(int argc, char** argv, int& i, SpeculativeServe& o);
// Fails (qkv::Error) on flags that do not go together.
void check_speculative_flags(const SpeculativeServe& o);

}  // namespace qkv::serve
