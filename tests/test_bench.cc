// ctest-labels: cli
// The benchmark tooling: the JSON reader/writer, `qkv plot` (well-formed SVG
// with axes, labels and a legend), `qkv make-model` (a GGUF that load_model
// reads back as the same model), and `qkv bench` on the tiny synthetic model
// (its JSON has the rows asked for, with consistent statistics). The command
// line tests run the built qkv binary.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/linear.h"
#include "kernels/machine/probe.h"
#include "runtime/model.h"
#include "runtime/model_loader.h"
#include "runtime/synthetic.h"
#include "tools/bench/bench_json.h"

using qkv::tools::Json;

namespace {

// Measured speeds are checked only for being real figures, never against a
// floor: CI hosts are shared, and a descheduled thread can make a tiny read
// take milliseconds.
bool positive_finite(double x) { return x > 0 && std::isfinite(x); }

std::string qkv_binary() { return std::string(QKV_BINARY_DIR) + "/tools/qkv"; }

std::string scratch_dir() {
  const std::string dir = std::string(QKV_BINARY_DIR) + "/test_bench_scratch";
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

struct RunResult {
  int exit_code = -1;
  std::string out;  // stdout; stderr is captured into err
  std::string err;
};

// Runs `qkv ARGS` and captures its exit code, stdout and stderr.
RunResult run_qkv(const std::string& args) {
  struct stat st;
  REQUIRE_MESSAGE(::stat(qkv_binary().c_str(), &st) == 0, "build the qkv target first: ", qkv_binary());
  const std::string err_path = scratch_dir() + "/stderr.txt";
  const std::string cmd = qkv_binary() + " " + args + " 2>" + err_path;
  RunResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_path);
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  return r;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open ", path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

// Checks XML well-formedness as far as an SVG writer can get it wrong: every
// element closed in order, attribute values quoted, '&' only in entities,
// no '<' in text. Returns "" when fine, else what is wrong.
std::string xml_problem(const std::string& s) {
  std::vector<std::string> open;
  size_t i = 0;
  bool root_seen = false;
  while (i < s.size()) {
    if (s[i] == '&') {
      const size_t semi = s.find(';', i);
      if (semi == std::string::npos) return "unterminated entity";
      const std::string ent = s.substr(i, semi - i + 1);
      if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;")
        return "unknown entity " + ent;
      i = semi + 1;
      continue;
    }
    if (s[i] != '<') {
      if (s[i] == '>') return "stray '>' in text";
      ++i;
      continue;
    }
    if (s.compare(i, 5, "<?xml") == 0) {
      const size_t end = s.find("?>", i);
      if (end == std::string::npos) return "unterminated declaration";
      i = end + 2;
      continue;
    }
    const bool closing = i + 1 < s.size() && s[i + 1] == '/';
    size_t j = i + (closing ? 2 : 1);
    const size_t name_start = j;
    while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '-' || s[j] == ':')) ++j;
    const std::string name = s.substr(name_start, j - name_start);
    if (name.empty()) return "element without a name at " + std::to_string(i);
    // Attributes: name="value" pairs up to '>' or '/>'.
    bool self_closing = false;
    for (;;) {
      while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      if (j >= s.size()) return "unterminated tag <" + name;
      if (s[j] == '>') {
        ++j;
        break;
      }
      if (s[j] == '/' && j + 1 < s.size() && s[j + 1] == '>') {
        self_closing = true;
        j += 2;
        break;
      }
      if (closing) return "attributes on a closing tag </" + name;
      const size_t a0 = j;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '-' || s[j] == ':')) ++j;
      if (j == a0 || j >= s.size() || s[j] != '=') return "bad attribute in <" + name;
      ++j;
      if (j >= s.size() || s[j] != '"') return "unquoted attribute value in <" + name;
      const size_t end = s.find('"', j + 1);
      if (end == std::string::npos) return "unterminated attribute value in <" + name;
      const std::string value = s.substr(j + 1, end - j - 1);
      if (value.find('<') != std::string::npos) return "'<' in an attribute value of <" + name;
      j = end + 1;
    }
    if (closing) {
      if (open.empty() || open.back() != name) return "</" + name + "> does not close the open element";
      open.pop_back();
    } else if (!self_closing) {
      if (open.empty()) {
        if (root_seen) return "a second root element";
        root_seen = true;
      }
      open.push_back(name);
    } else if (open.empty()) {
      return "a self-closing root";
    }
    i = j;
  }
  if (!open.empty()) return "<" + open.back() + "> is never closed";
  if (!root_seen) return "no root element";
  return "";
}

// A small qkv-bench-shaped document with decode and batch rows.
std::string bench_doc(const std::string& label, double scale) {
  Json doc = Json::object();
  doc.set("tool", Json::string("qkv bench"));
  doc.set("label", Json::string(label));
  Json rows = Json::array();
  auto add = [&](const char* kind, double tokens, double depth, double batch, double tps) {
    Json r = Json::object();
    r.set("kind", Json::string(kind));
    r.set("tokens", Json::number(tokens));
    r.set("depth", Json::number(depth));
    r.set("batch", Json::number(batch));
    Json s = Json::object();
    s.set("median", Json::number(tps));
    s.set("min", Json::number(tps * 0.95));
    s.set("max", Json::number(tps * 1.05));
    r.set("tokens_per_s", std::move(s));
    rows.push(std::move(r));
  };
  add("decode", 32, 0, 1, 150 * scale);
  add("decode", 32, 1024, 1, 120 * scale);
  add("decode", 32, 4096, 1, 80 * scale);
  add("batch", 32, 128, 1, 140 * scale);
  add("batch", 32, 128, 4, 450 * scale);
  add("batch", 32, 128, 16, 1100 * scale);
  doc.set("rows", std::move(rows));
  return doc.dump();
}

}  // namespace

TEST_CASE("JSON: dump and parse round-trip, strictness") {
  Json o = Json::object();
  o.set("name", Json::string("a \"quoted\" \\ name\n\x01"));
  o.set("n", Json::number(42));
  o.set("x", Json::number(0.125));
  o.set("nan", Json::number(std::nan("")));  // JSON has no NaN: written as null
  o.set("ok", Json::boolean(true));
  Json a = Json::array();
  a.push(Json::number(-1.5e-7));
  a.push(Json::null());
  o.set("list", std::move(a));
  for (const int indent : {0, 2}) {
    const Json back = Json::parse(o.dump(indent));
    CHECK(back.at("name").as_string() == "a \"quoted\" \\ name\n\x01");
    CHECK(back.at("n").as_number() == 42);
    CHECK(back.at("x").as_number() == 0.125);
    CHECK(back.at("nan").is_null());
    CHECK(back.at("ok").as_bool());
    REQUIRE(back.at("list").items().size() == 2);
    CHECK(back.at("list").items()[0].as_number() == doctest::Approx(-1.5e-7).epsilon(1e-9));
    CHECK(back.at("list").items()[1].is_null());
  }
  CHECK(Json::parse("\"\\u00e9\\ud83d\\ude00\"").as_string() == "\xc3\xa9\xf0\x9f\x98\x80");
  for (const char* bad : {"", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "01", "1.", "-", "tru", "\"\\x\"",
                          "\"\\ud800\"", "{\"a\":1,\"a\":2}", "[1] 2", "\"a\nb\"", "nul"}) {
    CHECK_THROWS_AS(Json::parse(bad), qkv::Error);
  }
  CHECK_THROWS_AS(Json::parse(std::string(100, '[') + std::string(100, ']')), qkv::Error);  // too deep
  CHECK_THROWS_AS(Json::parse("{}").at("missing"), qkv::Error);
  CHECK_THROWS_AS(Json::parse("1").as_string(), qkv::Error);
}

TEST_CASE("qkv plot: well-formed SVG with axes, ticks, labels and a legend") {
  const std::string dir = scratch_dir();
  write_text(dir + "/a.json", bench_doc("143M f16 kv=f16 t=2", 1.0));
  write_text(dir + "/b.json", bench_doc("143M q8_0 <kv> & t=2", 1.4));  // needs escaping
  const std::string svg_path = dir + "/plot.svg";
  std::remove(svg_path.c_str());
  const RunResult r = run_qkv("plot " + dir + "/a.json " + dir + "/b.json -o " + svg_path + " --title 'Bench test'");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string svg = read_text(svg_path);
  CHECK(xml_problem(svg) == "");
  CHECK(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
  CHECK(svg.find(">Bench test</text>") != std::string::npos);
  // Two panels (no prefill rows given), each with both axes and axis labels.
  CHECK(count(svg, "class=\"panel\"") == 2);
  CHECK(count(svg, "class=\"axes\"") == 2);
  CHECK(svg.find(">context depth (tokens)</text>") != std::string::npos);
  CHECK(svg.find(">sequences stepping together</text>") != std::string::npos);
  CHECK(count(svg, ">tokens/s</text>") == 1);
  CHECK(count(svg, ">aggregate tokens/s</text>") == 1);
  // Depth ticks reach 4096; the batch axis is powers of two 1..16.
  CHECK(svg.find(">4000</text>") != std::string::npos);
  for (const char* t : {">1</text>", ">2</text>", ">4</text>", ">8</text>", ">16</text>"}) CHECK(svg.find(t) != std::string::npos);
  // One line per file per panel, 3 points each, with whiskers; the legend names both files.
  CHECK(count(svg, "<polyline") == 4);
  CHECK(count(svg, "<circle") == 4 * 3 + 2);
  CHECK(count(svg, "class=\"legend\"") == 1);
  CHECK(svg.find(">143M f16 kv=f16 t=2</text>") != std::string::npos);
  CHECK(svg.find(">143M q8_0 &lt;kv&gt; &amp; t=2</text>") != std::string::npos);

  // Bad input: a file that is not bench output, a missing file, no -o.
  write_text(dir + "/bad.json", "{\"tool\": \"other\"}");
  RunResult bad = run_qkv("plot " + dir + "/bad.json -o " + dir + "/x.svg");
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("not the output of qkv bench") != std::string::npos);
  bad = run_qkv("plot " + dir + "/does-not-exist.json -o " + dir + "/x.svg");
  CHECK(bad.exit_code == 1);
  write_text(dir + "/broken.json", "{\"tool\": \"qkv bench\", ");
  bad = run_qkv("plot " + dir + "/broken.json -o " + dir + "/x.svg");
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("invalid JSON") != std::string::npos);
  CHECK(run_qkv("plot " + dir + "/a.json").exit_code == 2);
}

TEST_CASE("qkv make-model: the GGUF loads back as the same model") {
  const std::string path = scratch_dir() + "/tiny-q8.gguf";
  std::remove(path.c_str());
  const RunResult r = run_qkv("make-model tiny --type q8_0 --seed 7 -q -o " + path);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const qkv::Model loaded = qkv::load_model(path);
  const qkv::ModelConfig want = qkv::synthetic_preset("tiny");
  const qkv::ModelConfig& got = loaded.config;
  CHECK(got.dim == want.dim);
  CHECK(got.hidden_dim == want.hidden_dim);
  CHECK(got.n_layers == want.n_layers);
  CHECK(got.n_heads == want.n_heads);
  CHECK(got.n_kv_heads == want.n_kv_heads);
  CHECK(got.head_dim == want.head_dim);
  CHECK(got.vocab_size == want.vocab_size);
  CHECK(got.context_length == want.context_length);
  // Bit-identical weights to the in-memory model of the same seed (Q8_0 where
  // rows allow it; the FFN-down rows of 172 values fall back to F16).
  const qkv::Model mem = qkv::make_synthetic_model(want, qkv::DType::Q8_0, 7, true);
  REQUIRE(loaded.layers.size() == mem.layers.size());
  auto same = [](const qkv::Matrix& a, const qkv::Matrix& b) {
    REQUIRE(a.type == b.type);
    REQUIRE(a.rows == b.rows);
    REQUIRE(a.cols == b.cols);
    const size_t bytes = size_t(a.rows) * qkv::dtype_row_bytes(a.type, size_t(a.cols));
    return std::memcmp(a.data, b.data, bytes) == 0;
  };
  CHECK(loaded.layers[0].wq.type == qkv::DType::Q8_0);
  CHECK(loaded.layers[1].ffn_down.type == qkv::DType::F16);
  CHECK(same(loaded.token_embd, mem.token_embd));
  CHECK(same(loaded.layers[1].wq, mem.layers[1].wq));
  CHECK(same(loaded.layers[1].ffn_down, mem.layers[1].ffn_down));
  CHECK(same(loaded.layers[0].attn_norm, mem.layers[0].attn_norm));
  CHECK(loaded.parameter_count() == mem.parameter_count());

  // qkv bench measures the file too (-z: the GGUF's own vocabulary).
  const RunResult b = run_qkv("bench -m " + path + " -z " + path +
                              " --json -q --no-probe -t 1 --reps 1 --steps 2 --prompt-lengths 8 --depths none --batches none");
  INFO(b.err);
  REQUIRE(b.exit_code == 0);
  const Json doc = Json::parse(b.out, "qkv bench -m output");
  CHECK(doc.at("model").at("source").as_string() == path);
  CHECK(doc.at("model").at("weight_type").as_string() == "q8_0");
  CHECK(doc.at("rows").items().size() == 1);

  CHECK(run_qkv("make-model nope -o " + path).exit_code == 1);
  CHECK(run_qkv("make-model tiny").exit_code == 2);
  CHECK(run_qkv("make-model tiny --type f8 -o " + path).exit_code == 1);
}

TEST_CASE("qkv bench --synthetic tiny: JSON rows and statistics") {
  const std::string json_copy = scratch_dir() + "/bench-copy.json";
  std::remove(json_copy.c_str());
  const RunResult r = run_qkv(
      "bench --synthetic tiny --type f32 --json -q --no-probe -t 2 --reps 3 --steps 4 --prompt-lengths 16,32 "
      "--depths 0,64 --batches 1,3 --batch-depth 8 --json-out " + json_copy);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(read_text(json_copy) == r.out);  // --json-out writes what --json prints
  const Json doc = Json::parse(r.out, "qkv bench output");
  CHECK(doc.at("tool").as_string() == "qkv bench");
  CHECK(doc.at("label").as_string() == "tiny f32 kv=f16 t=2");
  CHECK(doc.at("threads").as_number() == 2);
  CHECK(doc.at("reps").as_number() == 3);
  CHECK(doc.at("probe").is_null());
  CHECK(doc.at("load_average").is_object());
  const Json& m = doc.at("model");
  CHECK(m.at("dim").as_number() == 64);
  CHECK(m.at("n_layers").as_number() == 2);
  // f16 KV: 2 layers x (K + V) x 2 KV heads x 16 dims x 2 bytes.
  CHECK(m.at("kv_bytes_per_token").as_number() == 2 * 2 * 2 * 16 * 2);
  CHECK(m.at("weight_bytes_read_per_token").as_number() > 0);
  CHECK(m.at("weight_bytes_read_per_token").as_number() <= m.at("weight_bytes").as_number());

  struct Want {
    const char* kind;
    double tokens, depth, batch;
  };
  const Want want[] = {{"prefill", 16, 0, 1}, {"prefill", 32, 0, 1}, {"decode", 4, 0, 1},
                       {"decode", 4, 64, 1},  {"batch", 4, 8, 1},    {"batch", 4, 8, 3}};
  const auto& rows = doc.at("rows").items();
  REQUIRE(rows.size() == sizeof want / sizeof want[0]);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Json& row = rows[i];
    CAPTURE(i);
    CHECK(row.at("kind").as_string() == want[i].kind);
    CHECK(row.at("tokens").as_number() == want[i].tokens);
    CHECK(row.at("depth").as_number() == want[i].depth);
    CHECK(row.at("batch").as_number() == want[i].batch);
    for (const char* key : {"tokens_per_s", "ms_per_token"}) {
      const Json& s = row.at(key);
      CHECK(s.at("min").as_number() > 0);
      CHECK(s.at("min").as_number() <= s.at("median").as_number());
      CHECK(s.at("median").as_number() <= s.at("max").as_number());
    }
    // tokens/s and ms/token describe the same medians: for one sequence
    // tokens/s = 1000 / ms; for a batch, tokens/s = batch * 1000 / ms per step.
    CHECK(row.at("tokens_per_s").at("median").as_number() ==
          doctest::Approx(want[i].batch * 1000.0 / row.at("ms_per_token").at("median").as_number()).epsilon(1e-6));
    CHECK(row.at("peak_rss_mib").as_number() > 0);
    const bool prefill = want[i].kind == std::string("prefill");
    CHECK(row.at("gflops").is_null() == !prefill);
    CHECK(row.at("gbs").is_null() == prefill);
    CHECK(row.at("fma_peak_pct").is_null());  // no probe
    CHECK(row.at("dram_bw_pct").is_null());
  }
  CHECK(rows[4].at("speedup_vs_batch1").as_number() == 1.0);
  CHECK(rows[5].at("speedup_vs_batch1").as_number() > 0);
  CHECK(rows[0].at("speedup_vs_batch1").is_null());

  // Bad usage is a clear error, not a crash.
  RunResult bad = run_qkv("bench --synthetic nope -q --no-probe");
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("known: tiny, 143M, 1.1B") != std::string::npos);
  bad = run_qkv("bench --synthetic tiny --depths 1,x -q --no-probe");
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("--depths") != std::string::npos);
  bad = run_qkv("bench --synthetic tiny --kv-type q8_0 -q --no-probe");  // head_dim 16
  CHECK(bad.exit_code == 1);
  CHECK(run_qkv("bench -m x.gguf --synthetic tiny").exit_code == 2);
  bad = run_qkv("bench --synthetic tiny --region-per-call=yes");  // a switch, not a key=value flag
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("unknown flag '--region-per-call=yes'") != std::string::npos);
}

TEST_CASE("qkv bench --probe: the machine's ceilings as JSON") {
  // A small buffer keeps the test fast (it then measures cache, not DRAM,
  // bandwidth; the structure is what is checked here).
  const RunResult r = run_qkv("bench --probe --json -t 2 --probe-mib 16");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const Json p = Json::parse(r.out, "qkv bench --probe output");
  CHECK(p.at("threads").as_number() == 2);
  CHECK(p.at("buffer_bytes").as_number() == 16 << 20);
  CHECK(p.at("read_streams_per_thread").as_number() >= 2);
  for (const char* key : {"dram_read_gbs_1t", "dram_read_gbs", "fma_gflops_1t", "fma_gflops"}) {
    CAPTURE(key);
    CHECK(positive_finite(p.at(key).as_number()));
  }
  CHECK(!p.at("simd_target").as_string().empty());
}

TEST_CASE("qkv bench with the probe: a paired read after each repetition") {
  // A small probe buffer keeps the test fast; the tiny model's weights sit in
  // cache, so the figures are not DRAM ones: the fields and their relations
  // are what is checked.
  const RunResult r = run_qkv(
      "bench --synthetic tiny --type f32 --json -q -t 2 --reps 2 --steps 4 --prompt-lengths 8 --depths 0 "
      "--batches 2 --batch-depth 4 --probe-mib 16");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const Json doc = Json::parse(r.out, "qkv bench output");
  CHECK(doc.at("probe").is_object());
  const auto& rows = doc.at("rows").items();
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].at("kind").as_string() == "prefill");
  CHECK(rows[0].at("paired_probe_gbs").is_null());  // prefill is judged against the FMA peak
  CHECK(rows[0].at("dram_bw_pct_paired").is_null());
  for (size_t i = 1; i < rows.size(); ++i) {
    CAPTURE(i);
    const Json& p = rows[i].at("paired_probe_gbs");
    REQUIRE(p.is_object());
    CHECK(positive_finite(p.at("min").as_number()));
    CHECK(p.at("min").as_number() <= p.at("median").as_number());
    CHECK(p.at("median").as_number() <= p.at("max").as_number());
    CHECK(rows[i].at("dram_bw_pct_paired").as_number() > 0);
    CHECK(rows[i].at("dram_bw_pct").as_number() > 0);
  }
  // The table shows the paired column.
  const RunResult t = run_qkv("bench --synthetic tiny --type f32 -q -t 1 --reps 1 --steps 2 --prompt-lengths none "
                              "--depths 0 --batches none --probe-mib 16");
  INFO(t.err);
  REQUIRE(t.exit_code == 0);
  CHECK(t.out.find("%BWrep") != std::string::npos);
}

TEST_CASE("qkv bench --region-per-call: the earlier threading, named in the report") {
  const std::string args = "bench --synthetic tiny --type f16 --json -q -t 2 --reps 1 --steps 2 --prompt-lengths none "
                           "--depths 0 --batches 2 --batch-depth 4 --no-probe";
  for (const bool team : {true, false}) {
    const RunResult r = run_qkv(args + (team ? "" : " --region-per-call"));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const Json doc = Json::parse(r.out, "qkv bench output");
    CHECK(doc.at("decode_threading").as_string() == (team ? "team" : "region-per-call"));
    CHECK(doc.at("rows").items().size() == 2);
  }
  const RunResult t = run_qkv("bench --synthetic tiny -q --reps 1 --steps 2 --prompt-lengths none --depths 0 "
                              "--batches none --no-probe --region-per-call");
  REQUIRE(t.exit_code == 0);
  CHECK(t.out.find("region per kernel call") != std::string::npos);
}

TEST_CASE("probe functions: results and argument checks") {
  // 4 MiB, 64-byte aligned: a cache-resident read, enough to check the plumbing.
  std::vector<float> buf((4 << 20) / sizeof(float) + 16, 1.0f);
  void* p = buf.data();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  float* aligned = reinterpret_cast<float*>((a + 63) / 64 * 64);
  const uint64_t bytes = 4 << 20;
  CHECK(positive_finite(qkv::probe_read_bandwidth(aligned, bytes, 1, 2)));
  CHECK(positive_finite(qkv::probe_read_bandwidth(aligned, bytes - 64 * 3, 2, 1)));  // shares with a remainder
  CHECK(positive_finite(qkv::probe_fma_peak(1, 0.01)));
  CHECK_THROWS_AS(qkv::probe_read_bandwidth(aligned + 1, bytes - 64, 1, 1), qkv::Error);  // misaligned
  CHECK_THROWS_AS(qkv::probe_read_bandwidth(aligned, 100, 1, 1), qkv::Error);           // not lines
  CHECK_THROWS_AS(qkv::probe_read_bandwidth(aligned, bytes, 0, 1), qkv::Error);
  CHECK_THROWS_AS(qkv::probe_read_bandwidth(aligned, bytes, 1, 0), qkv::Error);
  CHECK_THROWS_AS(qkv::probe_fma_peak(1, 0.0), qkv::Error);

  // Regions: only whole 64-byte lines are read, so any start and size will do.
  const uint8_t* bytes8 = reinterpret_cast<const uint8_t*>(aligned);
  const qkv::ProbeRegion regions[] = {{bytes8 + 3, (1 << 20) + 100}, {bytes8 + (2 << 20), 1 << 20}, {nullptr, 0}};
  CHECK(positive_finite(qkv::probe_read_regions(regions, 3, 2, 2)));
  // Cold: the lines are flushed from the caches before each pass, never changed.
  CHECK(positive_finite(qkv::probe_read_regions(regions, 3, 2, 2, /*cold=*/true)));
  CHECK(std::all_of(buf.begin(), buf.end(), [](float x) { return x == 1.0f; }));
  const qkv::ProbeRegion short_ones[] = {{bytes8 + 1, 64}, {bytes8, 63}};  // no whole line
  CHECK(qkv::probe_read_regions(short_ones, 2, 1, 1) == 0.0);
  CHECK(qkv::probe_read_regions(nullptr, 0, 1, 1) == 0.0);
  const qkv::ProbeRegion missing[] = {{nullptr, 64}};
  CHECK_THROWS_AS(qkv::probe_read_regions(missing, 1, 1, 1), qkv::Error);
  CHECK_THROWS_AS(qkv::probe_read_regions(regions, 1, 0, 1), qkv::Error);
  CHECK_THROWS_AS(qkv::probe_read_regions(regions, 1, 1, 0), qkv::Error);
  // flush_regions (the decode benchmarks' cold rows): any start and size, the
  // bytes unchanged; a region with bytes but no data, or no threads, refused.
  qkv::flush_regions(regions, 3, 2);
  CHECK(std::all_of(buf.begin(), buf.end(), [](float x) { return x == 1.0f; }));
  CHECK_THROWS_AS(qkv::flush_regions(missing, 1, 1), qkv::Error);
  CHECK_THROWS_AS(qkv::flush_regions(regions, 1, 0), qkv::Error);
  qkv::ProbeOptions o;
  o.buffer_bytes = 1000;  // below 1 MiB
  CHECK_THROWS_AS(qkv::probe_machine(o), qkv::Error);
}
