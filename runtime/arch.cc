#include "runtime/arch.h"

#include <cmath>
#include <cstdio>

#include "kernels/error.h"

namespace qkv {

namespace {

using P = Presence;
constexpr RopeStyle kAdj = RopeStyle::Adjacent, kNeox = RopeStyle::Neox;
constexpr Activation kSilu = Activation::SiLU, kGelu = Activation::GeluTanh;

// name, rope, act, bias, qk_norm, post_norms, fused_qkv, fused_gate_up, sqrt(dim) embedding,
// output, rope_freqs, longrope, rope_dim == head_dim, softcaps (attn, final), window key,
// default window, swa period, local rope base
const ArchSpec kArchs[] = {
    {"llama", kAdj, kSilu, P::Optional, false, false, false, false, false, P::Optional, P::Optional, P::None, true,
     0, 0, P::None, 0, 0, 0},
    {"qwen2", kNeox, kSilu, P::Required, false, false, false, false, false, P::Optional, P::None, P::None, false, 0,
     0, P::None, 0, 0, 0},
    {"qwen3", kNeox, kSilu, P::None, true, false, false, false, false, P::Optional, P::None, P::None, false, 0, 0,
     P::None, 0, 0, 0},
    {"phi3", kNeox, kSilu, P::None, false, false, true, true, false, P::Required, P::None, P::Optional, false, 0, 0,
     P::Optional, 0, 0, 0},
    {"gemma", kNeox, kGelu, P::None, false, false, false, false, true, P::None, P::None, P::None, false, 0, 0,
     P::None, 0, 0, 0},
    {"gemma2", kNeox, kGelu, P::None, false, true, false, false, true, P::None, P::None, P::None, false, 50, 30,
     P::Optional, 4096, 2, 0},
    {"gemma3", kNeox, kGelu, P::None, true, true, false, false, true, P::Optional, P::None, P::None, false, 0, 0,
     P::Required, 0, 6, 10000},
};

// Encoders, as llama.cpp b4748's LLM_ARCH_BERT and LLM_ARCH_NOMIC_BERT (build_bert).
// The fields above as for the decoders, then: causal, layer_norm, learned
// positions, token types, output/FFN biases, gated FFN, rank head.
const ArchSpec kEncoderArchs[] = {
    {"bert", kNeox, Activation::GeluTanhTable, P::Required, false, false, false, false, false, P::None, P::None,
     P::None, false, 0, 0, P::None, 0, 0, 0, false, true, true, true, true, false, P::Optional},
    {"nomic-bert", kNeox, kSilu, P::None, false, false, true, false, false, P::None, P::None, P::None, false, 0, 0,
     P::None, 0, 0, 0, false, true, false, true, false, true, P::None},
};

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof(b), "%g", v);
  return b;
}

}  // namespace

const ArchSpec* find_arch(const std::string& name) {
  for (const ArchSpec& a : kArchs) {
    if (name == a.name) return &a;
  }
  for (const ArchSpec& a : kEncoderArchs) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

std::vector<std::string> arch_names() {
  std::vector<std::string> n;
  for (const ArchSpec& a : kArchs) n.push_back(a.name);
  return n;
}

std::vector<std::string> encoder_arch_names() {
  std::vector<std::string> n;
  for (const ArchSpec& a : kEncoderArchs) n.push_back(a.name);
  return n;
}

std::string known_arch_list() {
  std::string known;
  for (const std::string& n : arch_names()) known += (known.empty() ? "" : ", ") + n;
  for (const std::string& n : encoder_arch_names()) known += ", " + n + " (embeddings)";
  return known;
}

const ArchSpec& arch_spec(const std::string& name) {
  if (const ArchSpec* a = find_arch(name)) return *a;
  fail("architecture '", name, "' is not supported (qkv runs: ", known_arch_list(), ")");
}

void apply_arch(const ArchSpec& s, ModelConfig* c) {
  c->architecture = s.name;
  c->rope_style = s.rope_style;
  c->activation = s.activation;
  c->qkv_bias = s.qkv_bias == P::Required;
  c->qk_norm = s.qk_norm;
  c->post_norms = s.post_norms;
  c->embed_scale = s.embed_scale_sqrt_dim ? std::sqrt(static_cast<float>(c->dim)) : 1.0f;
  c->attn_softcap = s.default_attn_softcap;
  c->final_softcap = s.default_final_softcap;
  c->sliding_window = s.window_key == P::None ? 0 : s.default_window;
  c->swa_period = s.swa_period;
  c->rope_theta_local = s.rope_theta_local;
  c->causal = s.causal;
  c->layer_norm = s.layer_norm;
  c->learned_positions = s.learned_positions;
  c->token_types = s.token_types;
  c->out_ffn_bias = s.out_ffn_bias;
  c->ffn_gated = s.ffn_gated;
  c->rank_head = false;  // the file's tensors say (rank_head Optional)
}

namespace {

const char* pooling_name(int32_t p) {
  switch (p) {
    case 0: return "none (per token)";
    case 1: return "mean";
    case 2: return "cls (first token)";
    case 3: return "last token";
    case 4: return "rank (classifier head score)";
  }
  return "unknown";
}

std::vector<std::string> describe_encoder(const ModelConfig& c) {
  std::vector<std::string> out;
  out.push_back(std::string("encoder:         bidirectional attention within each sequence (embeddings, no ") +
                "generation)");
  if (c.learned_positions) {
    out.push_back("positions:       learned (position_embd, " + std::to_string(c.context_length) + " rows)");
  } else {
    out.push_back(std::string("rope:            ") + (c.rope_style == RopeStyle::Neox ? "NEOX halves" : "adjacent pairs") +
                  ", base " + fmt(c.rope_theta));
  }
  std::string input = "token";
  if (c.token_types) input += " + token type 0";
  if (c.learned_positions) input += " + position";
  out.push_back("input:           " + input + " embeddings, then LayerNorm (token_embd_norm)");
  std::string attn;
  if (c.qkv_bias) attn = "Q/K/V biases";
  if (c.out_ffn_bias) attn += std::string(attn.empty() ? "" : ", ") + "output bias";
  out.push_back("attention:       " + (attn.empty() ? std::string("plain") : attn));
  const std::string act = c.activation == Activation::SiLU ? "silu" : "gelu";
  std::string ffn = c.ffn_gated ? "down(" + act + "(gate) * up)" : "down(" + act + "(up))";
  if (c.out_ffn_bias) ffn += ", with biases";
  if (c.activation == Activation::GeluTanhTable) ffn += "; GELU-tanh through ggml's fp16 table, as llama.cpp";
  if (c.activation == Activation::GeluTanh) ffn += "; GELU-tanh";
  out.push_back("ffn:             " + ffn);
  out.push_back("norms:           LayerNorm with bias after each sublayer's residual add (post-norm)");
  out.push_back(std::string("pooling:         ") +
                (c.pooling_type < 0 ? "none stated in the file" : pooling_name(c.pooling_type)));
  if (c.rank_head) out.push_back("rank head:       cls, tanh, cls.output (one score per input)");
  return out;
}

}  // namespace

std::vector<std::string> describe_arch(const ModelConfig& c) {
  if (c.layer_norm) return describe_encoder(c);
  std::vector<std::string> out;
  std::string rope = std::string(c.rope_style == RopeStyle::Neox ? "NEOX halves" : "adjacent pairs") + ", base " +
                     fmt(c.rope_theta);
  if (c.rope_theta_local > 0) rope += " (sliding layers: base " + fmt(c.rope_theta_local) + ")";
  if (c.rope_freq_scale != 1.0f) rope += ", linear scaling x" + fmt(1.0 / c.rope_freq_scale);
  if (!c.rope_factors_short.empty()) {
    rope += ", LongRoPE long/short factors (short up to a " + std::to_string(c.rope_orig_context) + "-token context)";
  } else if (!c.rope_factors.empty()) {
    float lo = c.rope_factors[0], hi = lo;
    for (float f : c.rope_factors) lo = std::fmin(lo, f), hi = std::fmax(hi, f);
    rope += ", frequency factors " + fmt(lo) + ".." + fmt(hi);
  }
  if (c.rope_attn_factor != 1.0f) rope += ", attention factor " + fmt(c.rope_attn_factor);
  out.push_back("rope:            " + rope);
  std::string attn;
  auto add = [&](std::string& s, const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  if (c.qkv_bias) add(attn, "Q/K/V biases");
  if (c.qk_norm) add(attn, "per-head Q/K RMSNorm");
  if (c.attn_scale != 0) add(attn, "score scale " + fmt(c.attn_scale));
  if (c.attn_softcap > 0) add(attn, "score soft-cap " + fmt(c.attn_softcap));
  if (c.sliding_window > 0) {
    std::string w = "sliding window " + std::to_string(c.sliding_window) + " on ";
    if (c.swa_period == 0) {
      w += "every layer";
    } else {
      w += "layers l % " + std::to_string(c.swa_period) + " != " + std::to_string(c.swa_period - 1) + " (";
      int shown = 0;
      for (int64_t l = 0; l < c.n_layers && shown < 8; ++l) {
        if (c.layer_slides(l)) w += (shown++ ? "," : "") + std::to_string(l);
      }
      w += shown == 8 ? ",...)" : ")";
    }
    add(attn, w);
  }
  out.push_back("attention:       " + (attn.empty() ? std::string("plain") : attn));
  out.push_back(std::string("ffn:             ") +
                (c.activation == Activation::SiLU ? "SwiGLU (silu(gate) * up)" : "GELU-tanh gated (gelu(gate) * up)"));
  out.push_back(std::string("norms:           RMSNorm before attention and FFN") +
                (c.post_norms ? ", and on each sublayer's output" : ""));
  if (c.embed_scale != 1.0f) out.push_back("embedding scale: " + fmt(c.embed_scale));
  if (c.final_softcap > 0) out.push_back("logit soft-cap:  " + fmt(c.final_softcap));
  return out;
}

int64_t extent(const ModelConfig& c, Extent e) {
  switch (e) {
    case Extent::One: return 1;
    case Extent::Dim: return c.dim;
    case Extent::QDim: return c.q_dim();
    case Extent::KvDim: return c.kv_dim();
    case Extent::Hidden: return c.hidden_dim;
    case Extent::HeadDim: return c.head_dim;
    case Extent::QkvRows: return c.q_dim() + 2 * c.kv_dim();
    case Extent::GateUpRows: return 2 * c.hidden_dim;
  }
  return 0;
}

namespace {

// An encoder layer (llama.cpp's LLM_ARCH_BERT / LLM_ARCH_NOMIC_BERT tensors).
std::vector<LayerTensor> encoder_layer_tensors(const ArchSpec& s, const ModelConfig& c) {
  using E = Extent;
  using L = LayerWeights;
  std::vector<LayerTensor> t;
  if (s.fused_qkv) {
    t.push_back({"attn_qkv.weight", E::QkvRows, E::Dim, false, nullptr});
  } else {
    t.push_back({"attn_q.weight", E::QDim, E::Dim, false, &L::wq});
    if (c.qkv_bias) t.push_back({"attn_q.bias", E::One, E::QDim, true, &L::bq});
    t.push_back({"attn_k.weight", E::KvDim, E::Dim, false, &L::wk});
    if (c.qkv_bias) t.push_back({"attn_k.bias", E::One, E::KvDim, true, &L::bk});
    t.push_back({"attn_v.weight", E::KvDim, E::Dim, false, &L::wv});
    if (c.qkv_bias) t.push_back({"attn_v.bias", E::One, E::KvDim, true, &L::bv});
  }
  t.push_back({"attn_output.weight", E::Dim, E::QDim, false, &L::wo});
  if (c.out_ffn_bias) t.push_back({"attn_output.bias", E::One, E::Dim, true, &L::bo});
  t.push_back({"attn_output_norm.weight", E::One, E::Dim, true, &L::attn_out_norm});
  t.push_back({"attn_output_norm.bias", E::One, E::Dim, true, &L::attn_out_norm_b});
  t.push_back({"ffn_up.weight", E::Hidden, E::Dim, false, &L::ffn_up});
  if (c.out_ffn_bias) t.push_back({"ffn_up.bias", E::One, E::Hidden, true, &L::ffn_up_b});
  if (c.ffn_gated) t.push_back({"ffn_gate.weight", E::Hidden, E::Dim, false, &L::ffn_gate});
  t.push_back({"ffn_down.weight", E::Dim, E::Hidden, false, &L::ffn_down});
  if (c.out_ffn_bias) t.push_back({"ffn_down.bias", E::One, E::Dim, true, &L::ffn_down_b});
  t.push_back({"layer_output_norm.weight", E::One, E::Dim, true, &L::layer_out_norm});
  t.push_back({"layer_output_norm.bias", E::One, E::Dim, true, &L::layer_out_norm_b});
  return t;
}

}  // namespace

std::vector<LayerTensor> layer_tensors(const ArchSpec& s, const ModelConfig& c) {
  if (s.layer_norm) return encoder_layer_tensors(s, c);
  using E = Extent;
  using L = LayerWeights;
  std::vector<LayerTensor> t;
  t.push_back({"attn_norm.weight", E::One, E::Dim, true, &L::attn_norm});
  if (s.fused_qkv) {
    t.push_back({"attn_qkv.weight", E::QkvRows, E::Dim, false, nullptr});
  } else {
    t.push_back({"attn_q.weight", E::QDim, E::Dim, false, &L::wq});
    t.push_back({"attn_k.weight", E::KvDim, E::Dim, false, &L::wk});
    t.push_back({"attn_v.weight", E::KvDim, E::Dim, false, &L::wv});
  }
  if (c.qkv_bias) {
    t.push_back({"attn_q.bias", E::One, E::QDim, true, &L::bq});
    t.push_back({"attn_k.bias", E::One, E::KvDim, true, &L::bk});
    t.push_back({"attn_v.bias", E::One, E::KvDim, true, &L::bv});
  }
  if (c.qk_norm) {
    t.push_back({"attn_q_norm.weight", E::One, E::HeadDim, true, &L::q_norm});
    t.push_back({"attn_k_norm.weight", E::One, E::HeadDim, true, &L::k_norm});
  }
  t.push_back({"attn_output.weight", E::Dim, E::QDim, false, &L::wo});
  if (c.post_norms) t.push_back({"post_attention_norm.weight", E::One, E::Dim, true, &L::post_attn_norm});
  t.push_back({"ffn_norm.weight", E::One, E::Dim, true, &L::ffn_norm});
  if (s.fused_gate_up) {
    t.push_back({"ffn_up.weight", E::GateUpRows, E::Dim, false, nullptr});
  } else {
    t.push_back({"ffn_gate.weight", E::Hidden, E::Dim, false, &L::ffn_gate});
    t.push_back({"ffn_up.weight", E::Hidden, E::Dim, false, &L::ffn_up});
  }
  t.push_back({"ffn_down.weight", E::Dim, E::Hidden, false, &L::ffn_down});
  if (c.post_norms) t.push_back({"post_ffw_norm.weight", E::One, E::Dim, true, &L::post_ffn_norm});
  return t;
}

Matrix row_view(const Matrix& m, int64_t row0, int64_t rows) {
  QKV_CHECK(row0 >= 0 && rows >= 0 && row0 + rows <= m.rows, "row_view: rows ", row0, "..", row0 + rows,
            " outside a matrix of ", m.rows);
  const size_t rb = dtype_row_bytes(m.type, static_cast<size_t>(m.cols));
  return Matrix{static_cast<const uint8_t*>(m.data) + static_cast<size_t>(row0) * rb, m.type, rows, m.cols};
}

void split_fused(const LayerTensor& t, const Matrix& w, const ModelConfig& c, LayerWeights* l) {
  if (t.rows == Extent::QkvRows) {  // [Q; K; V]
    l->wq = row_view(w, 0, c.q_dim());
    l->wk = row_view(w, c.q_dim(), c.kv_dim());
    l->wv = row_view(w, c.q_dim() + c.kv_dim(), c.kv_dim());
  } else {  // [gate; up]
    QKV_CHECK(t.rows == Extent::GateUpRows, "split_fused: '", t.name, "' is not a fused tensor");
    l->ffn_gate = row_view(w, 0, c.hidden_dim);
    l->ffn_up = row_view(w, c.hidden_dim, c.hidden_dim);
  }
}

std::vector<const Matrix*> fused_parts(const LayerTensor& t, const LayerWeights& l) {
  if (t.rows == Extent::QkvRows) return {&l.wq, &l.wk, &l.wv};
  return {&l.ffn_gate, &l.ffn_up};
}

}  // namespace qkv
