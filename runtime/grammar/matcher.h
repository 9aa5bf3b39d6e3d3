// Grammar-constrained decoding: which tokens may come next, and the parse
// state after each chosen token.
//
// The allowed set of a state is the union over its parse stacks. For each
// distinct stack (its positions from top to bottom) the vocabulary is
// classified once per grammar, by one walk of the token trie (a prefix the
// grammar rejects skips its whole subtree) and kept; later steps at the same
// stack, in this sequence or any other using the grammar, cost a lookup and
// a bitmap union. A grammar's stacks are few: they follow the nesting of the
// schema, not the length of the output (repetition runs in constant depth).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/grammar/grammar.h"
#include "runtime/grammar/stacks.h"
#include "runtime/grammar/token_trie.h"

namespace qkv::grammar {

// A grammar bound to a vocabulary, shared by the sequences that use it;
// thread-safe.
class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTrie> trie);
  const Grammar& grammar() const { return grammar_; }
  const TokenTrie& trie() const { return *trie_; }
  const StackMachine& machine() const { return machine_; }
  int64_t words() const { return (trie_->vocab_size() + 63) / 64; }

  // The tokens allowed from one stack: a bitmap when many are, else their ids.
  struct StackMask {
    std::vector<uint64_t> bits;
    std::vector<int32_t> ids;
  };
  // For the stack whose top is frame top of arena (computed once, then cached).
  const StackMask& stack_mask(const std::vector<Frame>& arena, int32_t top) const;
  // Stacks classified so far.
  size_t cached_stacks() const;

 private:
  StackMask classify(const std::vector<Frame>& arena, int32_t top) const;

  Grammar grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  StackMachine machine_;
  mutable std::mutex mu_;
  // Key: the stack's (pos, sub) pairs from top to bottom.
  mutable std::unordered_map<std::string, std::unique_ptr<StackMask>> cache_;
  mutable size_t cache_bytes_ = 0;
};

// One sequence's parse state.
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Fills mask (resized to words()) and applies it to logits: what a
  // constrained sample does first. Fails when no token is allowed.
  void constrain(float* logits, int64_t n, std::vector<uint64_t>& mask);

  // Sets bit t of bits (words() words) for every allowed token t, clears the
  // rest; end-of-generation tokens when the grammar can end here.
  void fill_mask(uint64_t* bits);
  // Advances by a token; false (state unchanged) when the grammar does not allow it.
  bool accept_token(int32_t token);
  // Advances by text; false (state unchanged) when the grammar does not allow it.
  bool accept_text(const std::string& text);
  // The text so far is a complete match (the grammar can end here).
  bool can_end() const { return finished_; }
  // Nothing but the end can follow.
  bool must_end() const { return finished_ && tops_.empty(); }
  const CompiledGrammar& compiled() const { return *grammar_; }

 private:
  // Whether the bytes can be consumed from top frame f (scratch frames are dropped after).
  bool bytes_fit(int32_t f, const std::string& bytes);
  // Steps every top by the bytes into next_tops_ / next_finished; false when none survives.
  bool step(const std::string& bytes, Tops& out);
  // Keeps only the frames the tops reach, merging equal stacks.
  void compact(const Tops& tops);

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::vector<Frame> arena_;
  std::vector<int32_t> tops_;
  bool finished_ = false;
  Tops scratch_a_, scratch_b_;
};

// Sets logits[t] to -inf for every token t the mask does not allow (and for
// ids past the mask's vocabulary, which a model's padded output may have).
// Returns how many tokens the mask allows.
int64_t mask_logits(float* logits, int64_t n, const uint64_t* bits, int64_t vocab);

}  // namespace qkv::grammar
