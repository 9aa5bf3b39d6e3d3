#include "tools/inspect/explain_lessons.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "qkv.h"
#include "tools/args.h"

namespace qkv::tools {

namespace {

struct Attended {
  std::vector<float> out, weights;  // [Hq][Lq][d], [Hq][Lq][Lk]
};

// One attention call (batch B) through the kernel or the reference; q is
// [B][Hq][Lq][d], k and v [B][Hkv][Lk][d] f32. scale 0: 1/sqrt(d).
Attended attend(int64_t B, int64_t Hq, int64_t Hkv, int64_t Lq, int64_t Lk, int64_t d, const std::vector<float>& q,
                const std::vector<float>& k, const std::vector<float>& v, float scale, qkv_attention_impl impl,
                bool causal = false) {
  qkv_attention_params p;
  qkv_attention_params_init(&p);
  p.batch = B;
  p.q_heads = Hq;
  p.kv_heads = Hkv;
  p.q_len = Lq;
  p.kv_len = Lk;
  p.head_dim = d;
  p.scale = scale;
  p.causal = causal;
  p.threads = 1;
  Attended a;
  a.out.resize(static_cast<size_t>(B * Hq * Lq * d));
  a.weights.resize(static_cast<size_t>(B * Hq * Lq * Lk));
  check(qkv_attention_weights(&p, q.data(), k.data(), v.data(), QKV_TYPE_F32, a.out.data(), a.weights.data(), impl),
        "attention");
  return a;
}

std::vector<float> flat(const Matrix64& m) {
  std::vector<float> f;
  for (const auto& r : m) f.insert(f.end(), r.begin(), r.end());
  return f;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}
std::string fmt4(double v) { return fixed(v, 4); }

// Decimal rounding as a hand computation does it (half away from zero).
double round_to(double x, int places) {
  const double s = std::pow(10.0, places);
  return std::round(x * s + std::copysign(1e-9, x)) / s;
}

std::vector<double> softmax(const std::vector<double>& x) {
  const double m = *std::max_element(x.begin(), x.end());
  std::vector<double> e(x.size());
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) sum += e[i] = std::exp(x[i] - m);
  for (double& v : e) v /= sum;
  return e;
}

std::string vec_text(const std::vector<double>& v, int places) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + fixed(v[i], places);
  return s + "]";
}

Matrix64 matmul(const Matrix64& a, const Matrix64& b) {  // a [n][m] x b [m][p]
  Matrix64 c(a.size(), std::vector<double>(b[0].size(), 0.0));
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = 0; j < b[0].size(); ++j) {
      for (size_t t = 0; t < b.size(); ++t) c[i][j] += a[i][t] * b[t][j];
    }
  }
  return c;
}

void matrix_table(Section& s, const std::string& title, const Matrix64& computed, const Matrix64* assumed,
                  const std::string& row_label) {
  std::vector<std::string> cols = {row_label};
  for (size_t j = 0; j < computed[0].size(); ++j) cols.push_back("computed[" + std::to_string(j + 1) + "]");
  if (assumed) {
    for (size_t j = 0; j < computed[0].size(); ++j) cols.push_back("tutorial[" + std::to_string(j + 1) + "]");
  }
  Table& t = s.table(title, cols);
  for (size_t i = 0; i < computed.size(); ++i) {
    std::vector<Cell> row = {txt(row_label + " " + std::to_string(i + 1))};
    for (double v : computed[i]) row.push_back(num(v));
    if (assumed) {
      for (double v : (*assumed)[i]) row.push_back(num(v));
    }
    t.rows.push_back(row);
  }
}

}  // namespace

SixKeys tutorial_six_keys() {
  SixKeys s;
  s.q = {1.2, -0.5, 0.8, 0.3};
  s.k = {{0.9, 0.1, -0.2, 0.4}, {0.3, 1.2, 0.5, -0.1}, {0.6, -0.3, 0.7, 0.9},
         {-0.2, 0.5, 0.1, 0.3}, {0.8, 0.0, 0.2, -0.1}, {0.1, 0.4, -0.3, 0.6}};
  s.v = {{0.2, 0.3, -0.1, 0.4}, {0.5, -0.2, 0.8, 0.1}, {0.3, 0.7, 0.2, -0.3},
         {-0.1, 0.4, 0.5, 0.2}, {0.4, 0.1, -0.2, 0.3}, {0.0, 0.6, 0.3, 0.5}};
  s.names = {"The", "cat", "sat", "on", "the", "mat"};
  return s;
}

void lesson_single_query(Doc& doc, const SixKeys& in, bool tutorial_rounding) {
  const size_t n = in.k.size(), d = in.q.size();
  Section& s = doc.section("single_query", "One query over " + std::to_string(n) + " keys (d = " + std::to_string(d) + ")");
  s.note("query q = " + vec_text(in.q, 4));

  std::vector<double> dots(n), scaled(n), ex(n), w(n);
  Table& t3 = s.table("Step 3: raw dot products q·k", {"key", "sum of products", "terms", "q·k"});
  for (size_t i = 0; i < n; ++i) {
    std::string prods, terms;
    for (size_t j = 0; j < d; ++j) {
      const double a = in.q[j], b = in.k[i][j];
      prods += (j ? " + " : "") + (a < 0 ? "(" + fmt(a) + ")" : fmt(a)) + "*" + (b < 0 ? "(" + fmt(b) + ")" : fmt(b));
      const double p = a * b;
      terms += j ? (p < 0 ? " - " : " + ") + fmt(std::fabs(round_to(p, 6))) : fmt(round_to(p, 6));
    }
    dots[i] = dot(in.q, in.k[i]);
    t3.rows.push_back({txt(in.names[i]), txt(prods), txt(terms), num(dots[i])});
  }
  const double rd = std::sqrt(static_cast<double>(d));
  Table& t4 = s.table("Step 4: divide by sqrt(d) = " + fmt4(rd), {"key", "q·k", "q·k / sqrt(d)"});
  for (size_t i = 0; i < n; ++i) {
    scaled[i] = dots[i] / rd;
    t4.rows.push_back({txt(in.names[i]), num(dots[i]), num(scaled[i])});
  }
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += ex[i] = std::exp(scaled[i]);
  for (size_t i = 0; i < n; ++i) w[i] = ex[i] / sum;

  // The same attention through qkv's two implementations.
  const std::vector<float> qf(in.q.begin(), in.q.end()), kf = flat(in.k), vf = flat(in.v);
  const auto nn = static_cast<int64_t>(n), dd = static_cast<int64_t>(d);
  const Attended ref = attend(1, 1, 1, 1, nn, dd, qf, kf, vf, 0, QKV_ATTENTION_REFERENCE);
  const Attended ker = attend(1, 1, 1, 1, nn, dd, qf, kf, vf, 0, QKV_ATTENTION_KERNEL);

  Table& t5 = s.table("Step 5: softmax (exp, their sum, weight = exp / sum)",
                      {"key", "exp(score)", "weight", "reference (fp64)", "kernel (f32)", "kernel - reference"});
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    total += w[i];
    t5.rows.push_back({txt(in.names[i]), num(ex[i]), num(w[i]), num(ref.weights[i], 6), num(ker.weights[i], 6),
                       num(static_cast<double>(ker.weights[i]) - ref.weights[i], 9)});
  }
  t5.rows.push_back({txt("sum"), num(sum), num(total), num(std::accumulate(ref.weights.begin(), ref.weights.end(), 0.0), 6),
                     num(std::accumulate(ker.weights.begin(), ker.weights.end(), 0.0), 6), txt("")});
  s.note("The kernels subtract the largest score before exp (the same weights, no overflow); the streaming "
         "kernel never stores the weights unless asked (this call takes its materialized path).");

  std::vector<double> out(d, 0.0);
  Table& t6 = s.table("Step 6: output = sum of weight * value, per dimension",
                      {"dim", "weighted sum", "output", "reference (fp64)", "kernel (f32)", "kernel - reference"});
  for (size_t j = 0; j < d; ++j) {
    std::string terms;
    for (size_t i = 0; i < n; ++i) {
      out[j] += w[i] * in.v[i][j];
      terms += (i ? " + " : "") + fmt4(w[i]) + "*" + (in.v[i][j] < 0 ? "(" + fmt(in.v[i][j]) + ")" : fmt(in.v[i][j]));
    }
    t6.rows.push_back({txt(std::to_string(j + 1)), txt(terms), num(out[j]), num(ref.out[j], 6), num(ker.out[j], 6),
                       num(static_cast<double>(ker.out[j]) - ref.out[j], 9)});
  }
  s.note("weights = " + vec_text(w, 4) + "   output = " + vec_text(out, 4));
  if (!tutorial_rounding) return;

  // The hand computation: scores to 3 places, exp to 2, weights to 3, products to 4, outputs to 3.
  std::vector<double> ex_h(n), w_h(n), out_h(d, 0.0);
  double sum_h = 0;
  for (size_t i = 0; i < n; ++i) sum_h += ex_h[i] = round_to(std::exp(round_to(scaled[i], 3)), 2);
  for (size_t i = 0; i < n; ++i) w_h[i] = round_to(ex_h[i] / sum_h, 3);
  for (size_t j = 0; j < d; ++j) {
    for (size_t i = 0; i < n; ++i) out_h[j] += round_to(w_h[i] * in.v[i][j], 4);
    out_h[j] = round_to(out_h[j], 3);
  }
  Table& tr = s.table("Rounding early, as the hand computation does (exp to 2 places, sum " + fmt(sum_h) +
                          ", weights to 3): how far it moved each number",
                      {"value", "exact", "hand", "hand - exact"});
  for (size_t i = 0; i < n; ++i) {
    tr.rows.push_back({txt("weight " + in.names[i]), num(w[i]), num(w_h[i], 3), num(w_h[i] - w[i], 5)});
  }
  for (size_t j = 0; j < d; ++j) {
    tr.rows.push_back({txt("output " + std::to_string(j + 1)), num(out[j]), num(out_h[j], 3), num(out_h[j] - out[j], 5)});
  }
}

void lesson_scaling(Doc& doc) {
  Section& s = doc.section("scaling", "Why scale by sqrt(d_k)");
  s.note("q and k with independent unit-variance components: Var(q·k) = d, so the dot product's standard "
         "deviation is sqrt(d). 2000 random pairs per d; softmax over 16 random keys, 500 queries, through the "
         "production kernel with scale 1 (unscaled) and 1/sqrt(d).");
  Table& t = s.table("", {"d", "sqrt(d)", "std(q·k)", "max weight unscaled", "max weight scaled",
                          "entropy unscaled (nats)", "entropy scaled (nats)"});
  std::mt19937_64 rng(20260301);
  std::normal_distribution<double> nd(0.0, 1.0);
  const int64_t pairs = 2000, trials = 500, keys = 16;
  for (const int64_t d : {4, 64, 512}) {
    double s1 = 0, s2 = 0;
    for (int64_t p = 0; p < pairs; ++p) {
      double x = 0;
      for (int64_t i = 0; i < d; ++i) x += nd(rng) * nd(rng);
      s1 += x;
      s2 += x * x;
    }
    const double mean = s1 / pairs, sd = std::sqrt(s2 / pairs - mean * mean);
    std::vector<float> q(static_cast<size_t>(trials * d)), k(static_cast<size_t>(trials * keys * d));
    for (float& x : q) x = static_cast<float>(nd(rng));
    for (float& x : k) x = static_cast<float>(nd(rng));
    double max_w[2] = {0, 0}, ent[2] = {0, 0};
    for (int scaled = 0; scaled < 2; ++scaled) {
      const Attended a = attend(trials, 1, 1, 1, keys, d, q, k, k, scaled ? 0.0f : 1.0f, QKV_ATTENTION_KERNEL);
      for (int64_t r = 0; r < trials; ++r) {
        double m = 0, e = 0;
        for (int64_t j = 0; j < keys; ++j) {
          const double p = a.weights[r * keys + j];
          m = std::max(m, p);
          if (p > 0) e -= p * std::log(p);
        }
        max_w[scaled] += m / trials;
        ent[scaled] += e / trials;
      }
    }
    t.rows.push_back({num(static_cast<double>(d), 0), num(std::sqrt(static_cast<double>(d))), num(sd), num(max_w[0]),
                      num(max_w[1]), num(ent[0]), num(ent[1])});
  }
  s.note("Uniform weights over 16 keys have entropy ln 16 = " + fmt4(std::log(16.0)) +
         " nats; unscaled scores at large d put nearly all weight on one key (softmax saturates).");

  Table& t2 = s.table("softmax of large and small score differences (fp64, and the kernel with d = 1, q = 1, k = score)",
                      {"scores", "softmax (fp64)", "kernel", "tutorial prints"});
  const std::vector<std::vector<double>> inputs = {{10, 1, 0, -1}, {1.0, 0.1, 0.0, -0.1}};
  const char* printed[] = {"[0.9999, 0.0001, 0.0000, 0.0000]", "[0.58, 0.21, 0.16, 0.05]"};
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<float> kf(inputs[i].begin(), inputs[i].end()), one = {1.0f};
    const Attended a = attend(1, 1, 1, 1, static_cast<int64_t>(kf.size()), 1, one, kf, kf, 1.0f, QKV_ATTENTION_KERNEL);
    t2.rows.push_back({txt(vec_text(inputs[i], 1)), txt(vec_text(softmax(inputs[i]), 4)),
                       txt(vec_text(std::vector<double>(a.weights.begin(), a.weights.end()), 4)), txt(printed[i])});
  }
}

void lesson_similarity(Doc& doc, const SixKeys& in) {
  Section& s = doc.section("similarity", "Dot product, cosine similarity and Euclidean distance on the same keys");
  const size_t n = in.k.size();
  const double qn = std::sqrt(dot(in.q, in.q)), rd = std::sqrt(static_cast<double>(in.q.size()));
  std::vector<double> dots(n), cosv(n), negdist(n), norms(n);
  for (size_t i = 0; i < n; ++i) {
    norms[i] = std::sqrt(dot(in.k[i], in.k[i]));
    dots[i] = dot(in.q, in.k[i]);
    cosv[i] = dots[i] / (qn * norms[i]);
    double dist2 = 0;
    for (size_t j = 0; j < in.q.size(); ++j) dist2 += (in.q[j] - in.k[i][j]) * (in.q[j] - in.k[i][j]);
    negdist[i] = -std::sqrt(dist2);
  }
  auto ranks = [&](const std::vector<double>& v) {
    std::vector<size_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] > v[b]; });
    std::vector<int> r(n);
    for (size_t p = 0; p < n; ++p) r[idx[p]] = static_cast<int>(p + 1);
    return r;
  };
  auto scaled_softmax = [&](const std::vector<double>& v) {
    std::vector<double> x(v);
    for (double& e : x) e /= rd;
    return softmax(x);
  };
  const auto rd_ = ranks(dots), rc = ranks(cosv), re = ranks(negdist);
  const auto wd = scaled_softmax(dots), wc = scaled_softmax(cosv), we = scaled_softmax(negdist);
  s.note("|q| = " + fmt4(qn) + ". q·k = |q| |k| cos: with q fixed, each key's norm |k| multiplies its cosine, "
         "so a long key can outrank a better-aligned short one. Weights: softmax(score / sqrt(d)) for each score.");
  Table& t = s.table("", {"key", "|k|", "q·k", "rank (dot)", "cos", "rank (cos)", "-|q-k|", "rank (dist)", "w(dot)", "w(cos)", "w(-dist)"});
  for (size_t i = 0; i < n; ++i) {
    t.rows.push_back({txt(in.names[i]), num(norms[i]), num(dots[i]), num(rd_[i], 0), num(cosv[i]), num(rc[i], 0),
                      num(negdist[i]), num(re[i], 0), num(wd[i]), num(wc[i]), num(we[i])});
  }
}

void lesson_multihead(Doc& doc) {
  Section& s = doc.section("multi_head", "Multi-head attention: 2 heads, d_model = 4, d_k = 2 (section 05)");
  const Matrix64 X = {{1.0, 0.5, -0.3, 0.8}, {0.2, 0.9, 0.4, -0.1}};
  const Matrix64 WQ[2] = {{{0.1, 0.2}, {0.3, 0.4}, {-0.1, 0.5}, {0.6, -0.2}}, {{-0.2, 0.3}, {0.1, 0.5}, {0.4, -0.1}, {0.2, 0.6}}};
  const Matrix64 WK[2] = {{{0.2, -0.1}, {0.4, 0.3}, {0.1, 0.5}, {-0.3, 0.2}}, {{0.3, 0.1}, {-0.1, 0.4}, {0.2, 0.5}, {0.1, -0.2}}};
  const Matrix64 WV[2] = {{{0.3, 0.1}, {-0.2, 0.4}, {0.5, 0.2}, {0.1, -0.3}}, {{0.1, 0.4}, {0.3, -0.2}, {-0.1, 0.5}, {0.2, 0.3}}};
  const Matrix64 WO = {{0.1, 0.2, 0.3, 0.4}, {0.2, 0.1, 0.4, 0.3}, {0.3, 0.4, 0.1, 0.2}, {0.4, 0.3, 0.2, 0.1}};
  // What the tutorial assumes ("suppose we get") instead of computing, and what it prints at the end.
  const Matrix64 K1_assumed = {{0.35, 0.25}, {0.42, 0.18}}, V1_assumed = {{0.21, 0.33}, {0.28, 0.15}};
  const Matrix64 head2_assumed = {{0.355, 0.343}, {0.343, 0.345}};
  const Matrix64 final_printed = {{0.3167, 0.318, 0.2745, 0.2758}, {0.315, 0.317, 0.273, 0.274}};
  s.note("X = " + vec_text(X[0], 1) + ", " + vec_text(X[1], 1) + "; every head: Q = X W_Q, K = X W_K, V = X W_V "
         "(fp64 here), then attention over both words (no causal mask, as in the tutorial) through qkv's kernels.");

  Matrix64 Q[2], K[2], V[2];
  for (int h = 0; h < 2; ++h) {
    Q[h] = matmul(X, WQ[h]);
    K[h] = matmul(X, WK[h]);
    V[h] = matmul(X, WV[h]);
    const std::string H = std::to_string(h + 1);
    matrix_table(s, "Q" + H + " = X W_Q" + H, Q[h], nullptr, "word");
    matrix_table(s, "K" + H + " = X W_K" + H + (h == 0 ? " (the tutorial assumes its values)" : ""), K[h],
                 h == 0 ? &K1_assumed : nullptr, "word");
    matrix_table(s, "V" + H + " = X W_V" + H + (h == 0 ? " (the tutorial assumes its values)" : ""), V[h],
                 h == 0 ? &V1_assumed : nullptr, "word");
  }
  // [1][2 heads][2 words][2]
  std::vector<float> q, k, v;
  for (int h = 0; h < 2; ++h) {
    for (const auto& r : Q[h]) q.insert(q.end(), r.begin(), r.end());
    for (const auto& r : K[h]) k.insert(k.end(), r.begin(), r.end());
    for (const auto& r : V[h]) v.insert(v.end(), r.begin(), r.end());
  }
  const Attended ref = attend(1, 2, 2, 2, 2, 2, q, k, v, 0, QKV_ATTENTION_REFERENCE);
  const Attended ker = attend(1, 2, 2, 2, 2, 2, q, k, v, 0, QKV_ATTENTION_KERNEL);
  Table& ts = s.table("Scores Q Kᵀ / sqrt(2), weights and outputs per head (reference fp64; kernel f32 beside)",
                      {"head", "word", "score 1", "score 2", "weight 1", "weight 2", "out 1", "out 2", "kernel out 1",
                       "kernel out 2"});
  Matrix64 concat(2, std::vector<double>(4));
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 2; ++i) {
      std::vector<Cell> row = {num(h + 1, 0), num(i + 1, 0)};
      for (int j = 0; j < 2; ++j) row.push_back(num(dot(Q[h][i], K[h][j]) / std::sqrt(2.0)));
      for (int j = 0; j < 2; ++j) row.push_back(num(ref.weights[(h * 2 + i) * 2 + j]));
      for (int j = 0; j < 2; ++j) {
        const double o = ref.out[(h * 2 + i) * 2 + j];
        concat[i][h * 2 + j] = o;
        row.push_back(num(o));
      }
      for (int j = 0; j < 2; ++j) row.push_back(num(ker.out[(h * 2 + i) * 2 + j]));
      ts.rows.push_back(row);
    }
  }
  Matrix64 head2 = {{concat[0][2], concat[0][3]}, {concat[1][2], concat[1][3]}};
  matrix_table(s, "Head 2's output (the tutorial assumes its values)", head2, &head2_assumed, "word");
  matrix_table(s, "Concatenation [head 1 | head 2]", concat, nullptr, "word");
  matrix_table(s, "Output = concat W_O (the tutorial's printed values beside)", matmul(concat, WO), &final_printed, "word");

  // MQA: both query heads read one K/V (head 1's projections).
  std::vector<float> k1(k.begin(), k.begin() + 4), v1(v.begin(), v.begin() + 4);
  const Attended mqa = attend(1, 2, 1, 2, 2, 2, q, k1, v1, 0, QKV_ATTENTION_KERNEL);
  const Attended mqa_ref = attend(1, 2, 1, 2, 2, 2, q, k1, v1, 0, QKV_ATTENTION_REFERENCE);
  Table& tm = s.table("MQA: one shared K/V (K1, V1) for both query heads, through the same kernel",
                      {"query head", "reads KV head", "word", "out 1", "out 2", "reference out 1", "reference out 2"});
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 2; ++i) {
      tm.rows.push_back({num(h + 1, 0), num(1, 0), num(i + 1, 0), num(mqa.out[(h * 2 + i) * 2]),
                         num(mqa.out[(h * 2 + i) * 2 + 1]), num(mqa_ref.out[(h * 2 + i) * 2]),
                         num(mqa_ref.out[(h * 2 + i) * 2 + 1])});
    }
  }
  s.note("Query head 1 gets the same output under MHA and MQA (it reads K1/V1 either way); head 2 now reads "
         "K1/V1 instead of K2/V2. With 2 query heads, GQA with 2 groups is MHA and with 1 group is MQA.");
  Table& tg = s.table("Which K/V each query head reads (query head h reads KV head h / (Hq / Hkv)), and KV-cache bytes "
                      "per token per layer (K and V)",
                      {"layout", "Hq", "Hkv", "KV head of query heads 1..Hq", "bytes (this example, f32, d_k 2)",
                       "bytes (Hq 32, d_k 128, f16)", "saved vs MHA"});
  for (const int64_t hkv : {4, 2, 1}) {
    std::string map;
    for (int64_t h = 0; h < 4; ++h) map += (h ? " " : "") + std::to_string(h / (4 / hkv) + 1);
    const char* name = hkv == 4 ? "MHA" : hkv == 1 ? "MQA" : "GQA (2 groups)";
    const double big_hkv = hkv == 4 ? 32 : hkv == 2 ? 8 : 1;
    tg.rows.push_back({txt(name), num(4, 0), num(static_cast<double>(hkv), 0), txt(map), num(2.0 * hkv * 2 * 4, 0),
                       num(2.0 * big_hkv * 128 * 2, 0), txt(fmt(100.0 * (1.0 - big_hkv / 32.0)) + "%")});
  }
  s.note("The large configuration's rows use Hkv 32, 8 and 1 (Llama-2-7B-like MHA, Llama-3-8B-like GQA, MQA).");
}

void lesson_custom(Doc& doc, const CustomInput& in) {
  const auto Lq = static_cast<int64_t>(in.q.size()), Lk = static_cast<int64_t>(in.k.size());
  QKV_CHECK(Lq >= 1 && Lk >= 1, "--q and --k need at least one row each");
  QKV_CHECK(in.v.size() == in.k.size(), "--v needs as many rows as --k (", in.k.size(), "), not ", in.v.size());
  QKV_CHECK(in.heads >= 1 && in.kv_heads >= 1 && in.heads % in.kv_heads == 0, "--heads (", in.heads,
            ") must be a multiple of --kv-heads (", in.kv_heads, ")");
  const auto qw = static_cast<int64_t>(in.q[0].size());
  QKV_CHECK(qw % in.heads == 0, "a --q row has ", qw, " values, not a multiple of --heads ", in.heads);
  const int64_t d = qw / in.heads;
  for (const auto& r : in.q) QKV_CHECK(static_cast<int64_t>(r.size()) == qw, "--q rows differ in length");
  for (const auto* m : {&in.k, &in.v}) {
    for (const auto& r : *m) {
      QKV_CHECK(static_cast<int64_t>(r.size()) == in.kv_heads * d, "--k/--v rows need kv_heads * d = ",
                in.kv_heads * d, " values (d = ", d, " from --q and --heads), not ", r.size());
    }
  }
  if (in.heads == 1 && Lq == 1 && !in.causal) {
    SixKeys s{in.q[0], in.k, in.v, {}};
    for (int64_t i = 0; i < Lk; ++i) s.names.push_back("k" + std::to_string(i + 1));
    lesson_single_query(doc, s, false);
    return;
  }
  // [1][H][L][d] from rows of H*d.
  auto heads_major = [&](const Matrix64& rows, int64_t H) {
    std::vector<float> f(static_cast<size_t>(H * static_cast<int64_t>(rows.size()) * d));
    for (size_t i = 0; i < rows.size(); ++i) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t j = 0; j < d; ++j) f[(h * rows.size() + i) * d + j] = static_cast<float>(rows[i][h * d + j]);
      }
    }
    return f;
  };
  const auto q = heads_major(in.q, in.heads), k = heads_major(in.k, in.kv_heads), v = heads_major(in.v, in.kv_heads);
  const Attended ref = attend(1, in.heads, in.kv_heads, Lq, Lk, d, q, k, v, 0, QKV_ATTENTION_REFERENCE, in.causal);
  const Attended ker = attend(1, in.heads, in.kv_heads, Lq, Lk, d, q, k, v, 0, QKV_ATTENTION_KERNEL, in.causal);
  Section& s = doc.section("custom", "Your numbers: " + std::to_string(in.heads) + " query heads, " +
                                         std::to_string(in.kv_heads) + " KV heads, d = " + std::to_string(d) +
                                         (in.causal ? ", causal" : ""));
  for (int64_t h = 0; h < in.heads; ++h) {
    const int64_t kvh = h / (in.heads / in.kv_heads);
    std::vector<std::string> cols = {"query"};
    for (int64_t j = 0; j < Lk; ++j) cols.push_back("w(k" + std::to_string(j + 1) + ")");
    for (int64_t j = 0; j < d; ++j) cols.push_back("out " + std::to_string(j + 1));
    cols.push_back("max |kernel - reference|");
    Table& t = s.table("Head " + std::to_string(h + 1) + " (reads KV head " + std::to_string(kvh + 1) +
                           "): weights and output (reference fp64)",
                       cols);
    for (int64_t i = 0; i < Lq; ++i) {
      std::vector<Cell> row = {txt("q" + std::to_string(i + 1))};
      double diff = 0;
      for (int64_t j = 0; j < Lk; ++j) {
        const size_t at = static_cast<size_t>((h * Lq + i) * Lk + j);
        row.push_back(num(ref.weights[at]));
        diff = std::max(diff, std::fabs(static_cast<double>(ker.weights[at]) - ref.weights[at]));
      }
      for (int64_t j = 0; j < d; ++j) {
        const size_t at = static_cast<size_t>((h * Lq + i) * d + j);
        row.push_back(num(ref.out[at]));
        diff = std::max(diff, std::fabs(static_cast<double>(ker.out[at]) - ref.out[at]));
      }
      row.push_back(num(diff, 9));
      t.rows.push_back(row);
    }
  }
}

}  // namespace qkv::tools
