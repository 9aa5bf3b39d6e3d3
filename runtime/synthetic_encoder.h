// Synthetic encoders (GGUF `bert`, `nomic-bert`): random weights of the shapes
// embedding models ship in, a generated WordPiece vocabulary of the model's
// size, and the GGUF files that llama.cpp b4748 and qkv both load, with the
// keys and tensor names of ../shared/reference/embed-README.md. For `qkv
// make-model` and `qkv bench --embed` (and tests, through the small preset).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model.h"
#include "runtime/synthetic.h"
#include "runtime/tokenizer.h"

namespace qkv {

// The encoder presets, as data (runtime/synthetic_encoder.cc):
//   tiny-bert    bert        64 wide, 2 layers, 2 heads, FFN 128, vocab 2048, ctx 128, MEAN
//   bge-small    bert       384 wide, 12 layers, 12 heads, FFN 1536, vocab 30522, ctx 512, CLS (~33M)
//   bge-base     bert       768 wide, 12 layers, 12 heads, FFN 3072, vocab 30522, ctx 512, CLS (~110M)
//   nomic-embed  nomic-bert 768 wide, 12 layers, 12 heads, FFN 3072 SwiGLU, RoPE base 1000,
//                           vocab 30528, ctx 2048, MEAN (~137M)
// Pooling is what the real models' converted files state (BGE: CLS, nomic: MEAN).
std::vector<std::string> synthetic_encoder_names();
bool is_synthetic_encoder(const std::string& name);
// The preset's configuration (architecture set). arch "" takes the preset's
// family; any other must be the preset's, else a qkv::Error naming both.
// An unknown name fails naming the known encoder presets.
ModelConfig synthetic_encoder_preset(const std::string& name, const std::string& arch = "");

// An encoder with deterministic random weights (same config, format and seed:
// same bits). Matrices (token_embd, position_embd and the layer projections)
// are uniform with variance 1/cols in format's type (F16 where the type cannot
// hold a row, as make_synthetic_model); token_types, norms and biases are f32:
// norm weights in [0.9, 1.1], norm biases and the other biases in [-0.1, 0.1].
Model make_synthetic_encoder(const ModelConfig& config, const WeightFormat& format, uint64_t seed = 1234);

// A WordPiece vocabulary of exactly vocab_size tokens (>= 1024) in llama.cpp's
// phantom-space form, built deterministically, in this order until it is full:
// [PAD] 0, [unused0..98] 1-99, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103
// (those five CONTROL, the rest NORMAL); printable ASCII (no capitals) as word
// starts ("▁a") and continuations ("a"); every pair of lowercase letters as a
// continuation; common English words ("▁the") and suffixes ("ing"); ß æ ð ø þ,
// lowercase Greek and Cyrillic and hiragana both ways; the CJK ideographs
// U+4E00..U+51FF as words; then generated syllable words ("▁kotari", a quarter
// of them continuations). Text made of those characters tokenizes without [UNK].
Tokenizer synthetic_wordpiece(int64_t vocab_size);

// Writes an encoder as GGUF v3 the way llama.cpp's converter writes BertModel /
// NomicBertModel: <arch>.context_length, embedding_length, feed_forward_length,
// block_count, attention.head_count, attention.layer_norm_epsilon,
// attention.causal (false), pooling_type, rope.freq_base (nomic-bert), and the
// WordPiece vocabulary (tokenizer.ggml.model "bert", token types,
// token_type_count and the unknown / seperator / padding / cls / mask ids).
// Fails unless tokenizer is a WordPiece vocabulary of the model's size.
void write_gguf_encoder(const Model& model, const std::string& path, const Tokenizer& tokenizer);

}  // namespace qkv
