#include "runtime/grammar/matcher.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>

#include "kernels/error.h"

namespace qkv::grammar {

namespace {

// Cached stack masks stop being kept past this much memory (they are still
// computed, each step).
constexpr size_t kMaxCacheBytes = size_t{256} << 20;

void sort_unique(std::vector<int32_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

std::string stack_key(const std::vector<Frame>& arena, int32_t f) {
  std::string key;
  for (; f >= 0; f = arena[static_cast<size_t>(f)].parent) {
    const Frame& fr = arena[static_cast<size_t>(f)];
    char buf[5];
    std::memcpy(buf, &fr.pos, 4);
    buf[4] = static_cast<char>(fr.sub);
    key.append(buf, 5);
  }
  return key;
}

}  // namespace

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTrie> trie)
    : grammar_(std::move(grammar)), trie_(std::move(trie)), machine_(grammar_) {
  QKV_CHECK(trie_ != nullptr, "grammar: no vocabulary");
}

size_t CompiledGrammar::cached_stacks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

const CompiledGrammar::StackMask& CompiledGrammar::stack_mask(const std::vector<Frame>& arena, int32_t top) const {
  std::string key = stack_key(arena, top);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return *it->second;
  }
  auto mask = std::make_unique<StackMask>(classify(arena, top));
  const size_t bytes = key.size() + mask->bits.size() * 8 + mask->ids.size() * 4 + 64;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;  // another thread got there first
  if (cache_bytes_ + bytes > kMaxCacheBytes) cache_.clear(), cache_bytes_ = 0;
  cache_bytes_ += bytes;
  return *cache_.emplace(std::move(key), std::move(mask)).first->second;
}

CompiledGrammar::StackMask CompiledGrammar::classify(const std::vector<Frame>& source, int32_t top) const {
  const TokenTrie& trie = *trie_;
  // The stack, copied top first into a walk arena (frames reindexed).
  std::vector<Frame> arena;
  {
    std::vector<Frame> chain;
    for (int32_t f = top; f >= 0; f = source[static_cast<size_t>(f)].parent) chain.push_back(source[static_cast<size_t>(f)]);
    arena.resize(chain.size());
    for (size_t i = 0; i < chain.size(); ++i) {
      arena[i] = chain[i];
      arena[i].parent = i + 1 < chain.size() ? static_cast<int32_t>(i + 1) : kNoParent;
    }
  }
  const size_t levels = trie.max_depth() + 1;
  std::vector<size_t> level_begin(levels + 1), level_end(levels + 1), arena_mark(levels + 1);
  std::vector<int32_t> tops{0};
  level_begin[0] = 0;
  level_end[0] = 1;
  arena_mark[0] = arena.size();

  std::vector<int32_t> allowed;
  Tops step;
  const size_t n = trie.nodes();
  for (size_t i = 1; i < n;) {
    const uint32_t d = trie.depth(i);
    arena.resize(arena_mark[d - 1]);
    tops.resize(level_end[d - 1]);
    step.clear();
    const uint8_t b = trie.byte(i);
    for (size_t k = level_begin[d - 1]; k < level_end[d - 1]; ++k) machine_.advance(arena, tops[k], b, step);
    if (step.frames.empty() && !step.finished) {
      i = trie.subtree_end(i);
      continue;
    }
    for (int32_t t = trie.token_at(i); t >= 0; t = trie.same_next(t)) allowed.push_back(t);
    if (step.frames.empty()) {  // the grammar ends exactly here: no longer token fits
      i = trie.subtree_end(i);
      continue;
    }
    sort_unique(step.frames);
    level_begin[d] = tops.size();
    tops.insert(tops.end(), step.frames.begin(), step.frames.end());
    level_end[d] = tops.size();
    arena_mark[d] = arena.size();
    ++i;
  }
  StackMask mask;
  if (static_cast<int64_t>(allowed.size()) * 32 < trie.vocab_size()) {
    std::sort(allowed.begin(), allowed.end());
    mask.ids = std::move(allowed);
  } else {
    mask.bits.assign(static_cast<size_t>(words()), 0);
    for (int32_t t : allowed) mask.bits[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  }
  return mask;
}

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar) : grammar_(std::move(grammar)) {
  const Grammar& g = grammar_->grammar();
  // The root's alternatives, expanded.
  Tops start;
  arena_.clear();
  for (uint32_t alt : g.alternatives[g.root]) {
    arena_.push_back({alt, 0, kNoParent});
    grammar_->machine().expand(arena_, static_cast<int32_t>(arena_.size() - 1), start);
  }
  compact(start);
}

void Matcher::fill_mask(uint64_t* bits) {
  const auto words = static_cast<size_t>(grammar_->words());
  std::memset(bits, 0, words * 8);
  for (int32_t top : tops_) {
    const CompiledGrammar::StackMask& m = grammar_->stack_mask(arena_, top);
    if (!m.bits.empty()) {
      for (size_t w = 0; w < words; ++w) bits[w] |= m.bits[w];
    }
    for (int32_t t : m.ids) bits[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  }
  if (finished_) {
    for (int32_t t : grammar_->trie().eog()) bits[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  }
}

void Matcher::constrain(float* logits, int64_t n, std::vector<uint64_t>& mask) {
  mask.resize(static_cast<size_t>(grammar_->words()));
  fill_mask(mask.data());
  if (mask_logits(logits, n, mask.data(), grammar_->trie().vocab_size()) == 0) {
    fail("grammar: no token of the vocabulary can continue the output here");
  }
}

int64_t mask_logits(float* logits, int64_t n, const uint64_t* bits, int64_t vocab) {
  const float ninf = -std::numeric_limits<float>::infinity();
  int64_t kept = 0;
  const int64_t covered = std::min(n, vocab);
  for (int64_t w = 0; w * 64 < covered; ++w) {
    const uint64_t word = bits[w];
    const int64_t end = std::min<int64_t>(covered, (w + 1) * 64);
    if (word == ~uint64_t{0} && end - w * 64 == 64) {
      kept += 64;
      continue;
    }
    for (int64_t t = w * 64; t < end; ++t) {
      if ((word >> (t & 63)) & 1) {
        ++kept;
      } else {
        logits[t] = ninf;
      }
    }
  }
  for (int64_t t = covered; t < n; ++t) logits[t] = ninf;
  return kept;
}

bool Matcher::step(const std::string& bytes, Tops& out) {
  const StackMachine& m = grammar_->machine();
  Tops& cur = scratch_a_;
  cur.clear();
  cur.frames = tops_;
  cur.finished = finished_;
  for (char c : bytes) {
    out.clear();
    for (int32_t f : cur.frames) m.advance(arena_, f, static_cast<uint8_t>(c), out);
    sort_unique(out.frames);
    if (out.frames.empty() && !out.finished) return false;
    std::swap(cur.frames, out.frames);
    cur.finished = out.finished;
  }
  std::swap(out.frames, cur.frames);
  out.finished = cur.finished;
  return true;
}

bool Matcher::accept_text(const std::string& text) {
  const size_t mark = arena_.size();
  Tops& next = scratch_b_;
  if (!step(text, next)) {
    arena_.resize(mark);
    return false;
  }
  compact(next);
  return true;
}

bool Matcher::accept_token(int32_t token) {
  const TokenTrie& trie = grammar_->trie();
  if (token < 0 || token >= trie.vocab_size()) return false;
  const auto& eog = trie.eog();
  if (std::binary_search(eog.begin(), eog.end(), token)) {
    if (!finished_) return false;
    tops_.clear();  // the end: nothing more
    return true;
  }
  const std::string& text = trie.text(token);
  if (text.empty()) return false;  // control and unused tokens never fit a grammar
  return accept_text(text);
}

void Matcher::compact(const Tops& tops) {
  // Rebuild the arena with just the stacks the tops reach, equal stacks
  // (same positions all the way down) becoming one frame chain.
  std::vector<Frame> fresh;
  std::map<std::tuple<uint32_t, uint8_t, int32_t>, int32_t> index;
  std::vector<int32_t> memo_old, memo_new;  // old frame -> new frame, for shared bottoms
  std::vector<int32_t> new_tops;
  std::vector<int32_t> chain;
  std::map<int32_t, int32_t> mapped;
  for (int32_t top : tops.frames) {
    chain.clear();
    int32_t f = top;
    int32_t below = kNoParent;
    for (; f >= 0; f = arena_[static_cast<size_t>(f)].parent) {
      auto it = mapped.find(f);
      if (it != mapped.end()) {
        below = it->second;
        break;
      }
      chain.push_back(f);
    }
    for (auto c = chain.rbegin(); c != chain.rend(); ++c) {
      const Frame& fr = arena_[static_cast<size_t>(*c)];
      const auto key = std::make_tuple(fr.pos, fr.sub, below);
      auto it = index.find(key);
      if (it == index.end()) {
        fresh.push_back({fr.pos, fr.sub, below});
        it = index.emplace(key, static_cast<int32_t>(fresh.size() - 1)).first;
      }
      mapped[*c] = it->second;
      below = it->second;
    }
    new_tops.push_back(below);
  }
  sort_unique(new_tops);
  arena_ = std::move(fresh);
  tops_ = std::move(new_tops);
  finished_ = tops.finished;
}

}  // namespace qkv::grammar
