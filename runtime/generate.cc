#include "runtime/generate.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>

#include "kernels/error.h"
#include "runtime/stop_strings.h"

namespace qkv {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// A lone raw byte that is neither printable nor white space (a fragment of a
// UTF-8 sequence or a control code) is not shown, as in llama2.c's safe_printf.
bool printable(const std::string& piece) {
  if (piece.size() != 1) return !piece.empty();
  const auto b = static_cast<unsigned char>(piece[0]);
  return std::isprint(b) || std::isspace(b);
}

}  // namespace

GenerateStats generate(Decoder& decoder, const Tokenizer& tokenizer, const std::string& prompt,
                       const GenerateOptions& options, const std::function<bool(const std::string&)>& emit) {
  GenerateStats stats;
  // BOS (and EOS) as the vocabulary asks (add_bos_token / add_eos_token).
  const std::vector<int32_t> tokens = tokenizer.encode(prompt, options.add_bos && tokenizer.add_bos(),
                                                       options.add_bos && tokenizer.add_eos(), options.parse_special);
  QKV_CHECK(!tokens.empty(), "the prompt is empty and no BOS is added: nothing to start from");
  const auto n = static_cast<int64_t>(tokens.size());
  stats.prompt_tokens = n;

  const int64_t room = decoder.context() - decoder.position(options.seq);
  if (n > room) {
    fail_as(ErrorKind::kContextOverflow, "the prompt has ", n, " tokens but the context has room for ", room,
            " more (raise the context size)");
  }
  int64_t max_forward = room;
  if (options.steps > 0) {
    max_forward = std::min(options.steps, room);
  } else if (options.n_predict >= 0) {
    max_forward = std::min(room, n + std::max<int64_t>(options.n_predict - 1, 0));
  }

  // Hands one token's text to emit; false when the caller asked to stop.
  auto show = [&](int32_t prev, int32_t next) {
    const std::string piece = tokenizer.decode(prev, next);
    return !printable(piece) || emit(piece);
  };
  // Generated text goes through the stop strings first.
  StopMatcher stops(options.stop);
  auto show_generated = [&](int32_t prev, int32_t next) {
    const std::string piece = tokenizer.decode(prev, next);
    if (!printable(piece)) return true;
    const std::string out = stops.feed(piece);
    return out.empty() || emit(out);
  };

  // Prompt: one batched prefill; its pieces (after the first token) are echoed.
  const int64_t n_prefill = std::min(n, max_forward);
  const int64_t start = decoder.position(options.seq);
  std::optional<Speculator> spec;
  if (options.speculative.drafter) {
    QKV_CHECK(!options.grammar, "speculative decoding does not combine with a grammar (drafted tokens would skip its "
              "mask): drop the draft model / n-gram drafting or the grammar");
    spec.emplace(decoder, options.seq, options.speculative, options.sampler);
  }
  auto t0 = std::chrono::steady_clock::now();
  Sampler sampler(options.sampler);
  const float* logits = decoder.prefill(options.seq, tokens.data(), n_prefill);
  stats.forward_passes = n_prefill;
  stats.prompt_ms = ms_since(t0);
  for (int64_t i = 1; i < std::min(n_prefill + 1, n); ++i) {
    if (!show(tokens[i - 1], tokens[i])) {
      stats.stop_reason = "stopped";
      return stats;
    }
  }
  if (n_prefill < n) {
    stats.stop_reason = "steps";
    return stats;
  }
  if (options.n_predict == 0) {
    stats.stop_reason = "n_predict";
    return stats;
  }

  t0 = std::chrono::steady_clock::now();
  std::vector<float> scratch(static_cast<size_t>(decoder.vocab_size()));
  int32_t token = tokens.back();
  std::vector<int32_t> history = tokens;  // what the penalties look back over
  std::optional<grammar::Matcher> matcher;
  std::vector<uint64_t> mask;
  if (options.grammar) matcher.emplace(options.grammar);
  for (;;) {
    int32_t next = 0;
    if (spec && spec->has_pending()) {
      next = spec->take_pending();  // decided by a verify pass
    } else {
      std::copy(logits, logits + scratch.size(), scratch.begin());
      if (matcher) matcher->constrain(scratch.data(), static_cast<int64_t>(scratch.size()), mask);
      next = sampler.sample(scratch.data(), static_cast<int64_t>(scratch.size()), history.data(),
                            static_cast<int64_t>(history.size()));
    }
    ++stats.generated_tokens;
    QKV_CHECK(!matcher || matcher->accept_token(next), "generate: the logit bias bans every token the grammar allows here");
    if (tokenizer.is_eog(next)) {  // EOS, EOT, <|im_end|>, <end_of_turn>, ...
      stats.stop_reason = "eos";
      break;
    }
    if (next == tokenizer.bos_id()) {
      stats.stop_reason = "bos";
      break;
    }
    if (!show_generated(token, next)) {
      stats.stop_reason = "stopped";
      break;
    }
    if (stops.stopped()) {
      stats.stop_reason = "stop";
      break;
    }
    token = next;
    history.push_back(next);
    if (options.n_predict > 0 && stats.generated_tokens >= options.n_predict) {
      stats.stop_reason = "n_predict";
      break;
    }
    if (stats.forward_passes >= max_forward) {
      stats.stop_reason = options.steps > 0 && stats.forward_passes >= options.steps ? "steps" : "context";
      break;
    }
    if (!spec) {
      logits = decoder.step(options.seq, token);
    } else if (!spec->has_pending()) {
      // Drafts fit in the positions and new tokens left after this one.
      int64_t room_left = max_forward - stats.forward_passes - 1;
      if (options.n_predict > 0) room_left = std::min(room_left, options.n_predict - stats.generated_tokens - 1);
      logits = spec->advance(history, room_left);
    }  // else: token is a verified draft, in the cache already
    ++stats.forward_passes;
  }
  if (spec) {
    // The cache holds what plain decoding's would: drafts decided past the stop are dropped.
    decoder.cache().truncate(options.seq, std::min(decoder.position(options.seq), start + stats.forward_passes));
    stats.drafted_tokens = spec->stats().drafted;
    stats.accepted_tokens = spec->stats().accepted;
    stats.verify_passes = spec->stats().verify_passes;
  }
  const std::string rest = stops.flush();
  if (!rest.empty() && stats.stop_reason != "stopped") emit(rest);
  stats.generate_ms = ms_since(t0);
  return stats;
}

}  // namespace qkv
