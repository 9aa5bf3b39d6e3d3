// ctest-labels: cli
// qkv explain --json: every number against a scalar fp64 computation written
// here and against the exact figures of the worked example (weights
// [0.1917, 0.1247, 0.2734, 0.0996, 0.2016, 0.1090], output [0.2534, 0.3494,
// 0.1775, 0.1420]; the hand computation's 0.192 ... and [0.254, 0.350, 0.178,
// 0.142]; softmax [1.0, 0.1, 0.0, -0.1] = [0.4745, 0.1929, 0.1746, 0.1580]).
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/bench/bench_json.h"

namespace {

using qkv::tools::Json;
using M = std::vector<std::vector<double>>;

const std::string kQkv = std::string(QKV_BINARY_DIR) + "/tools/qkv";

// Runs qkv with args; returns stdout and sets *status to the exit code.
std::string run(const std::string& args, int* status) {
  FILE* p = ::popen((kQkv + " " + args + " 2>/dev/null").c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

Json explain(const std::string& args) {
  int status = 0;
  const std::string out = run("explain --json " + args, &status);
  REQUIRE(status == 0);
  return Json::parse(out, "qkv explain --json");
}

const Json& section(const Json& doc, const std::string& id) {
  for (const Json& s : doc.at("sections").items()) {
    if (s.at("id").as_string() == id) return s;
  }
  FAIL("no section ", id);
  throw 0;
}

const Json& table(const Json& sec, const std::string& title_start) {
  for (const Json& t : sec.at("tables").items()) {
    if (t.at("title").as_string().rfind(title_start, 0) == 0) return t;
  }
  FAIL("no table starting '", title_start, "'");
  throw 0;
}

std::vector<double> column(const Json& t, const std::string& col) {
  std::vector<double> v;
  for (const Json& r : t.at("rows").items()) {
    const Json* c = r.find(col);
    if (c && c->is_number()) v.push_back(c->as_number());
  }
  return v;
}

double round4(double x) { return std::round(x * 1e4) / 1e4; }

std::vector<double> softmax(std::vector<double> x) {
  double m = x[0], s = 0;
  for (double e : x) m = std::max(m, e);
  for (double& e : x) s += e = std::exp(e - m);
  for (double& e : x) e /= s;
  return x;
}

M mul(const M& a, const M& b) {
  M c(a.size(), std::vector<double>(b[0].size()));
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < b[0].size(); ++j)
      for (size_t t = 0; t < b.size(); ++t) c[i][j] += a[i][t] * b[t][j];
  return c;
}

const std::vector<double> kQ = {1.2, -0.5, 0.8, 0.3};
const M kK = {{0.9, 0.1, -0.2, 0.4}, {0.3, 1.2, 0.5, -0.1}, {0.6, -0.3, 0.7, 0.9},
              {-0.2, 0.5, 0.1, 0.3}, {0.8, 0.0, 0.2, -0.1}, {0.1, 0.4, -0.3, 0.6}};
const M kV = {{0.2, 0.3, -0.1, 0.4}, {0.5, -0.2, 0.8, 0.1}, {0.3, 0.7, 0.2, -0.3},
              {-0.1, 0.4, 0.5, 0.2}, {0.4, 0.1, -0.2, 0.3}, {0.0, 0.6, 0.3, 0.5}};

}  // namespace

TEST_CASE("the single query over six keys: every step against fp64 and the exact figures") {
  const Json doc = explain("");
  const Json& s = section(doc, "single_query");
  std::vector<double> dots, scaled;
  for (const auto& k : kK) {
    double d = 0;
    for (size_t j = 0; j < 4; ++j) d += kQ[j] * k[j];
    dots.push_back(d);
    scaled.push_back(d / 2);
  }
  const std::vector<double> w = softmax(scaled);
  std::vector<double> out(4, 0.0);
  for (size_t j = 0; j < 4; ++j)
    for (size_t i = 0; i < 6; ++i) out[j] += w[i] * kV[i][j];

  const std::vector<double> got_dots = column(table(s, "Step 3"), "q·k");
  const std::vector<double> got_scaled = column(table(s, "Step 4"), "q·k / sqrt(d)");
  const Json& t5 = table(s, "Step 5");
  const std::vector<double> got_w = column(t5, "weight"), ref_w = column(t5, "reference (fp64)"),
                            ker_w = column(t5, "kernel (f32)");
  const Json& t6 = table(s, "Step 6");
  const std::vector<double> got_out = column(t6, "output"), ker_out = column(t6, "kernel (f32)");
  REQUIRE(got_dots.size() == 6);
  REQUIRE(got_w.size() == 7);  // six keys and the total
  REQUIRE(got_out.size() == 4);
  const double want_w[] = {0.1917, 0.1247, 0.2734, 0.0996, 0.2016, 0.1090};
  const double want_out[] = {0.2534, 0.3494, 0.1775, 0.1420};
  double sum_exp = 0;
  for (double x : scaled) sum_exp += std::exp(x);
  for (size_t i = 0; i < 6; ++i) {
    CHECK(got_dots[i] == doctest::Approx(dots[i]).epsilon(1e-12));
    CHECK(got_scaled[i] == doctest::Approx(scaled[i]).epsilon(1e-12));
    CHECK(got_w[i] == doctest::Approx(w[i]).epsilon(1e-12));
    CHECK(std::fabs(ref_w[i] - w[i]) < 1e-7);
    CHECK(std::fabs(ker_w[i] - w[i]) < 1e-6);
    CHECK(round4(got_w[i]) == doctest::Approx(want_w[i]).epsilon(1e-12));
  }
  CHECK(got_w[6] == doctest::Approx(1.0));
  CHECK(column(t5, "exp(score)").back() == doctest::Approx(sum_exp).epsilon(1e-12));
  for (size_t j = 0; j < 4; ++j) {
    CHECK(got_out[j] == doctest::Approx(out[j]).epsilon(1e-12));
    CHECK(std::fabs(ker_out[j] - out[j]) < 1e-6);
    CHECK(round4(got_out[j]) == doctest::Approx(want_out[j]).epsilon(1e-12));
  }
  // The hand computation's early rounding, and how far it moved each number.
  const Json& tr = table(s, "Rounding early");
  const std::vector<double> hand = column(tr, "hand"), moved = column(tr, "hand - exact");
  const double want_hand[] = {0.192, 0.125, 0.274, 0.099, 0.201, 0.109, 0.254, 0.350, 0.178, 0.142};
  REQUIRE(hand.size() == 10);
  for (size_t i = 0; i < 10; ++i) {
    CHECK(hand[i] == doctest::Approx(want_hand[i]).epsilon(1e-9));
    CHECK(moved[i] == doctest::Approx(hand[i] - (i < 6 ? w[i] : out[i - 6])).epsilon(1e-9));
  }
}

TEST_CASE("why sqrt(d): dot-product spread near sqrt(d), and the exact softmax of the small scores") {
  const Json doc = explain("");
  const Json& s = section(doc, "scaling");
  const Json& t = s.at("tables").items()[0];
  const std::vector<double> d = column(t, "d"), sd = column(t, "std(q·k)");
  const std::vector<double> ent_u = column(t, "entropy unscaled (nats)"), ent_s = column(t, "entropy scaled (nats)");
  REQUIRE(d.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(std::fabs(sd[i] / std::sqrt(d[i]) - 1) < 0.1);  // 2000 samples: about 3% sampling error
    CHECK(ent_s[i] > ent_u[i]);
  }
  const Json& t2 = table(s, "softmax of large");
  const std::string exact = t2.at("rows").items()[1].at("softmax (fp64)").as_string();
  const std::string kernel = t2.at("rows").items()[1].at("kernel").as_string();
  CHECK(exact == "[0.4745, 0.1929, 0.1746, 0.1580]");
  CHECK(kernel == exact);
  const std::vector<double> sm = softmax({1.0, 0.1, 0.0, -0.1});
  CHECK(round4(sm[0]) == doctest::Approx(0.4745));
}

TEST_CASE("multi-head: Q, K, V from X and the matrices, the heads, concat and W_O against fp64") {
  const Json doc = explain("");
  const Json& s = section(doc, "multi_head");
  const M X = {{1.0, 0.5, -0.3, 0.8}, {0.2, 0.9, 0.4, -0.1}};
  const M WQ[2] = {{{0.1, 0.2}, {0.3, 0.4}, {-0.1, 0.5}, {0.6, -0.2}}, {{-0.2, 0.3}, {0.1, 0.5}, {0.4, -0.1}, {0.2, 0.6}}};
  const M WK[2] = {{{0.2, -0.1}, {0.4, 0.3}, {0.1, 0.5}, {-0.3, 0.2}}, {{0.3, 0.1}, {-0.1, 0.4}, {0.2, 0.5}, {0.1, -0.2}}};
  const M WV[2] = {{{0.3, 0.1}, {-0.2, 0.4}, {0.5, 0.2}, {0.1, -0.3}}, {{0.1, 0.4}, {0.3, -0.2}, {-0.1, 0.5}, {0.2, 0.3}}};
  const M WO = {{0.1, 0.2, 0.3, 0.4}, {0.2, 0.1, 0.4, 0.3}, {0.3, 0.4, 0.1, 0.2}, {0.4, 0.3, 0.2, 0.1}};
  M concat(2, std::vector<double>(4));
  for (int h = 0; h < 2; ++h) {
    const M Q = mul(X, WQ[h]), K = mul(X, WK[h]), V = mul(X, WV[h]);
    const std::string H = std::to_string(h + 1);
    const Json& tk = table(s, "K" + H + " = X W_K" + H);
    CHECK(column(tk, "computed[1]")[0] == doctest::Approx(K[0][0]).epsilon(1e-12));
    CHECK(column(tk, "computed[2]")[1] == doctest::Approx(K[1][1]).epsilon(1e-12));
    for (int i = 0; i < 2; ++i) {
      std::vector<double> sc(2);
      for (int j = 0; j < 2; ++j) sc[j] = (Q[i][0] * K[j][0] + Q[i][1] * K[j][1]) / std::sqrt(2.0);
      const std::vector<double> w = softmax(sc);
      for (int c = 0; c < 2; ++c) concat[i][h * 2 + c] = w[0] * V[0][c] + w[1] * V[1][c];
    }
  }
  const Json& tc = table(s, "Concatenation");
  const Json& to = table(s, "Output = concat W_O");
  const M final_out = mul(concat, WO);
  for (int c = 0; c < 4; ++c) {
    const std::string col = "computed[" + std::to_string(c + 1) + "]";
    for (int i = 0; i < 2; ++i) {
      CHECK(std::fabs(column(tc, col)[i] - concat[i][c]) < 1e-7);
      CHECK(std::fabs(column(to, col)[i] - final_out[i][c]) < 1e-7);
    }
  }
  // The tutorial's assumed K1 is shown beside the computed one.
  CHECK(column(table(s, "K1 = X W_K1"), "tutorial[1]")[0] == doctest::Approx(0.35));
  // MQA: query head 1 is unchanged (it reads K1/V1 under MHA too).
  const Json& tm = table(s, "MQA");
  CHECK(std::fabs(column(tm, "out 1")[0] - concat[0][0]) < 1e-6);
  CHECK(column(tm, "reads KV head")[2] == 1);
}

TEST_CASE("own numbers with --q/--k/--v, GQA heads, causal, and bad input") {
  {
    const Json doc = explain("--q '1,0' --k '1,0;0,1' --v '1,2;3,4'");
    const std::vector<double> w = softmax({1 / std::sqrt(2.0), 0});
    const Json& t5 = table(section(doc, "single_query"), "Step 5");
    CHECK(column(t5, "weight")[0] == doctest::Approx(w[0]).epsilon(1e-12));
    const Json& t6 = table(section(doc, "single_query"), "Step 6");
    CHECK(column(t6, "output")[1] == doctest::Approx(w[0] * 2 + w[1] * 4).epsilon(1e-12));
  }
  {
    // Two query heads sharing one KV head (d = 2), two queries, causal.
    const Json doc = explain("--heads 2 --kv-heads 1 --causal --q '1,0,0,1;0.5,0.5,-1,2' --k '1,0;0,1' --v '1,2;3,4'");
    const Json& s = section(doc, "custom");
    const Json& h2 = table(s, "Head 2 (reads KV head 1)");
    const std::vector<double> w1 = column(h2, "w(k1)"), w2 = column(h2, "w(k2)"), o1 = column(h2, "out 1");
    REQUIRE(w1.size() == 2);
    CHECK(w1[0] == doctest::Approx(1.0));  // causal: query 1 sees key 1 only
    CHECK(w2[0] == doctest::Approx(0.0));
    const std::vector<double> w = softmax({-1 / std::sqrt(2.0), 2 / std::sqrt(2.0)});
    CHECK(w1[1] == doctest::Approx(w[0]).epsilon(1e-6));  // the reference returns f32
    CHECK(o1[1] == doctest::Approx(w[0] * 1 + w[1] * 3).epsilon(1e-6));
    for (double diff : column(h2, "max |kernel - reference|")) CHECK(diff < 1e-6);
  }
  int status = 0;
  run("explain --q '1,2' --k '1,2,3' --v '1,2,3'", &status);
  CHECK(status == 1);
  run("explain --q '1,2' --k '1,2'", &status);
  CHECK(status == 2);
  run("explain --q '1,x' --k '1,2' --v '1,2'", &status);
  CHECK(status == 1);
  run("explain --heads 3 --kv-heads 2 --q '1,2,3' --k '1,2' --v '1,2'", &status);
  CHECK(status == 1);
}
