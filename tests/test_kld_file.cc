// ctest-labels: asan
// llama.cpp's KL-divergence base file (runtime/kld_file.h): the row encoding
// against an fp64 log-softmax, and a reader that treats every byte as hostile
// (bad magic, impossible or overflowing header sizes, truncation, bad row scales).
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <tuple>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "runtime/kld_file.h"

namespace {

std::string temp_path(const std::string& name) {
  return std::string(QKV_BINARY_DIR) + "/test_kld_file." + std::to_string(::getpid()) + "." + name;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  if (!bytes.empty()) REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  std::fclose(f);
}

std::vector<uint8_t> header(const char* magic, int32_t n_ctx, int32_t n_vocab, int32_t n_chunk) {
  std::vector<uint8_t> b(20);
  std::memcpy(b.data(), magic, 8);
  std::memcpy(b.data() + 8, &n_ctx, 4);
  std::memcpy(b.data() + 12, &n_vocab, 4);
  std::memcpy(b.data() + 16, &n_chunk, 4);
  return b;
}

// The message of the format error opening path gives ("" if it opens).
std::string open_error(const std::string& path) {
  try {
    qkv::KldBaseFile::open(path);
  } catch (const qkv::Error& e) {
    CHECK(e.kind() == qkv::ErrorKind::kFormat);
    return e.what();
  }
  return "";
}

std::vector<float> random_logits(int64_t n, uint32_t seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, spread);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = nd(rng);
  return v;
}

}  // namespace

TEST_CASE("a row reads back as the fp64 log-softmax, to half a quantization step above the floor") {
  for (const int64_t n_vocab : {1, 2, 7, 512, 513}) {
    for (const float spread : {0.5f, 4.0f, 20.0f}) {
      const std::vector<float> x = random_logits(n_vocab, static_cast<uint32_t>(n_vocab * 31 + spread), spread);
      std::vector<uint16_t> row(static_cast<size_t>(qkv::kld_row_u16(n_vocab)), 0xffff);
      qkv::kld_encode_row(x.data(), n_vocab, row.data());
      double mx = x[0];
      for (float v : x) mx = std::max(mx, static_cast<double>(v));
      double s = 0;
      for (float v : x) s += std::exp(v - mx);
      const double lse = std::log(s);
      qkv::KldRow r;
      std::memcpy(&r.scale, row.data(), 4);
      std::memcpy(&r.min_log_prob, row.data() + 2, 4);
      r.q = row.data() + 4;
      for (int64_t i = 0; i < n_vocab; ++i) {
        const double want = x[i] - mx - lse;
        if (want > r.min_log_prob + r.scale) {
          CHECK(std::fabs(r.log_prob(i) - want) <= 0.5 * r.scale + 1e-5);
        } else {
          CHECK(r.log_prob(i) <= r.min_log_prob + r.scale + 1e-6);  // at the floor, max - 16 or the minimum
        }
      }
      for (int64_t i = 4 + n_vocab; i < qkv::kld_row_u16(n_vocab); ++i) CHECK(row[i] == 0);  // padding
    }
  }
}

TEST_CASE("writer and reader agree, and the writer leaves no file until finished") {
  const std::string path = temp_path("rt.kld");
  const int64_t n_ctx = 8, n_vocab = 5, n_chunk = 2;
  std::vector<int32_t> tokens(n_chunk * n_ctx);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % n_vocab);
  {
    qkv::KldBaseWriter w(path, n_ctx, n_vocab, n_chunk, tokens.data());
    const std::vector<float> x = random_logits(n_vocab, 1, 2.0f);
    w.add_row(x.data());
  }  // destroyed unfinished
  CHECK(access(path.c_str(), F_OK) != 0);
  CHECK(access((path + ".tmp." + std::to_string(::getpid())).c_str(), F_OK) != 0);
  {
    qkv::KldBaseWriter w(path, n_ctx, n_vocab, n_chunk, tokens.data());
    for (int64_t r = 0; r < n_chunk * qkv::kld_scored_per_chunk(n_ctx); ++r) {
      const std::vector<float> x = random_logits(n_vocab, static_cast<uint32_t>(r), 2.0f);
      w.add_row(x.data());
    }
    const std::vector<float> x = random_logits(n_vocab, 99, 2.0f);
    CHECK_THROWS_WITH(w.add_row(x.data()), doctest::Contains("more rows"));
    w.finish();
  }
  const qkv::KldBaseFile f = qkv::KldBaseFile::open(path);
  CHECK(f.n_ctx() == n_ctx);
  CHECK(f.n_vocab() == n_vocab);
  CHECK(f.n_chunk() == n_chunk);
  CHECK(f.tokens() == tokens);
  CHECK_THROWS(f.row(n_chunk, 0));
  CHECK_THROWS(f.row(0, qkv::kld_scored_per_chunk(n_ctx)));
  ::unlink(path.c_str());
}

TEST_CASE("a hostile base file is a format error naming the problem, never a crash") {
  const std::string path = temp_path("bad.kld");
  write_bytes(path, {});
  CHECK(open_error(path).find("no \"_logits_\" header") != std::string::npos);
  write_bytes(path, header("_logitz_", 8, 5, 1));
  CHECK(open_error(path).find("no \"_logits_\" header") != std::string::npos);
  std::vector<uint8_t> short_header = header("_logits_", 8, 5, 1);
  short_header.resize(15);
  write_bytes(path, short_header);
  CHECK(!open_error(path).empty());
  for (const auto& [n_ctx, n_vocab, n_chunk] :
       std::vector<std::tuple<int32_t, int32_t, int32_t>>{{0, 5, 1}, {3, 5, 1}, {8, 0, 1}, {8, 5, 0}, {-8, 5, 1}, {8, -5, 1}}) {
    write_bytes(path, header("_logits_", n_ctx, n_vocab, n_chunk));
    CHECK(open_error(path).find("impossible") != std::string::npos);
  }
  // Sizes that would need terabytes: checked against the file before anything is read.
  write_bytes(path, header("_logits_", 128, 512, INT32_MAX));
  CHECK(open_error(path).find("holds") != std::string::npos);
  write_bytes(path, header("_logits_", INT32_MAX, INT32_MAX, INT32_MAX));
  CHECK(open_error(path).find("overflow") != std::string::npos);
  // A truncated row section and one trailing byte.
  std::vector<uint8_t> b = header("_logits_", 4, 3, 1);
  b.resize(b.size() + 4 * 4 + 1 * (qkv::kld_row_u16(3) * 2) - 2);
  write_bytes(path, b);
  CHECK(open_error(path).find("but the file has") != std::string::npos);
  b.resize(b.size() + 3);
  write_bytes(path, b);
  CHECK(open_error(path).find("but the file has") != std::string::npos);
  // Right size, but a NaN scale in the row: reported when the row is read.
  b.resize(b.size() - 1);
  const float nan = std::nanf("");
  std::memcpy(b.data() + 20 + 16, &nan, 4);
  write_bytes(path, b);
  const qkv::KldBaseFile f = qkv::KldBaseFile::open(path);
  CHECK_THROWS_WITH(f.row(0, 0), doctest::Contains("bad scale"));
  ::unlink(path.c_str());
}
