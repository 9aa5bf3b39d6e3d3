// ctest-labels: kernels asan
// Scalar element-type conversions: the contract every SIMD path is checked against.
#include <doctest/doctest.h>

#include <cctype>
#include <cmath>
#include <string>
#include <limits>
#include <vector>

#include "kernels/dtype.h"

using namespace qkv;

TEST_CASE("bf16 rounds to nearest even") {
  CHECK(bf16_to_f32(f32_to_bf16(1.005859375f)) == 1.0078125f);  // above the tie: up
  CHECK(bf16_to_f32(f32_to_bf16(1.00390625f)) == 1.0f);         // exact tie, even is 1.0
  CHECK(bf16_to_f32(f32_to_bf16(1.01171875f)) == 1.015625f);    // tie, even is up
  CHECK(bf16_to_f32(f32_to_bf16(-2.5f)) == -2.5f);
  CHECK(bf16_to_f32(f32_to_bf16(0.0f)) == 0.0f);
  CHECK(std::signbit(bf16_to_f32(f32_to_bf16(-0.0f))));
  CHECK(std::isinf(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::infinity()))));
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  const float sub = f32_from_bits(0x00010000u);  // a subnormal bf16 can hold survives
  CHECK(bf16_to_f32(f32_to_bf16(sub)) == sub);
  CHECK(bf16_to_f32(f32_to_bf16(f32_from_bits(0x00000003u))) == 0.0f);  // too small: rounds to 0
}

TEST_CASE("f16 round trip and rounding") {
  // Every f16 bit pattern that is not NaN converts to f32 and back unchanged.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    REQUIRE(f32_to_f16(f) == h);
  }
  CHECK(f16_to_f32(f32_to_f16(1.0f + 1.0f / 2048)) == 1.0f);            // tie to even (down)
  CHECK(f16_to_f32(f32_to_f16(1.0f + 3.0f / 2048)) == 1.0f + 2.0f / 1024);  // tie to even (up)
  CHECK(f16_to_f32(f32_to_f16(65504.0f)) == 65504.0f);
  CHECK(std::isinf(f16_to_f32(f32_to_f16(65520.0f))));
  CHECK(f16_to_f32(f32_to_f16(65519.0f)) == 65504.0f);
  CHECK(f16_to_f32(f32_to_f16(std::ldexp(1.0f, -24))) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(f16_to_f32(f32_to_f16(std::ldexp(1.0f, -26))) == 0.0f);
}

TEST_CASE("q8_0 blocks") {
  std::vector<float> x(32), y(32);
  SUBCASE("zeros stay zero") {
    BlockQ8_0 b;
    quantize_q8_0_block(x.data(), &b);
    dequantize_q8_0_block(b, y.data());
    for (float v : y) CHECK(v == 0.0f);
  }
  SUBCASE("all-equal block is exact up to the f16 scale") {
    for (auto& v : x) v = 0.75f;
    BlockQ8_0 b;
    quantize_q8_0_block(x.data(), &b);
    dequantize_q8_0_block(b, y.data());
    for (int i = 0; i < 32; ++i) CHECK(b.qs[i] == 127);
    for (float v : y) CHECK(v == doctest::Approx(0.75).epsilon(1e-3));
  }
  SUBCASE("one huge outlier: error bounded by half a step") {
    for (int i = 0; i < 32; ++i) x[i] = 0.01f * (i - 16);
    x[5] = 1000.0f;
    BlockQ8_0 b;
    quantize_q8_0_block(x.data(), &b);
    dequantize_q8_0_block(b, y.data());
    const float step = f16_to_f32(b.d);
    for (int i = 0; i < 32; ++i) CHECK(std::fabs(y[i] - x[i]) <= 0.5f * step + 1000.0f * 1e-3f);
    CHECK(y[5] == doctest::Approx(1000.0).epsilon(1e-3));
  }
}

TEST_CASE("q8_0 blocks too small for an f16 scale, and NaN, store zeros") {
  std::vector<float> x(32, 1e-38f), y(32);
  BlockQ8_0 b;
  quantize_q8_0_block(x.data(), &b);
  dequantize_q8_0_block(b, y.data());
  for (float v : y) CHECK(v == 0.0f);
  for (int i = 0; i < 32; ++i) x[i] = 0.5f * i;
  x[3] = std::numeric_limits<float>::quiet_NaN();
  quantize_q8_0_block(x.data(), &b);
  CHECK(b.qs[3] == 0);
  CHECK(b.qs[31] == 127);
}

TEST_CASE("row encode/decode agree with the block functions and reject bad lengths") {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = std::sin(0.3f * i) * 3;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    std::vector<uint8_t> buf(dtype_row_bytes(t, 64));
    std::vector<float> y(64);
    encode_row(t, x.data(), 64, buf.data());
    decode_row(t, buf.data(), 64, y.data());
    const double tol = t == DType::F32 ? 0 : t == DType::F16 ? 3 * 0x1p-11 : t == DType::BF16 ? 3 * 0x1p-8 : 3.0 / 127;
    for (int i = 0; i < 64; ++i) CHECK(std::fabs(y[i] - x[i]) <= tol * 1.0001);
  }
  std::vector<uint8_t> buf(100);
  CHECK_THROWS_WITH(encode_row(DType::Q8_0, x.data(), 40, buf.data()),
                    doctest::Contains("cannot be stored as q8_0"));
}

TEST_CASE("type table: ggml ids, block sizes and names") {
  struct Want { DType t; uint32_t id; size_t values, bytes; const char* name; };
  const Want want[] = {
      {DType::F32, 0, 1, 4, "f32"},         {DType::F16, 1, 1, 2, "f16"},
      {DType::BF16, 30, 1, 2, "bf16"},      {DType::Q8_0, 8, 32, 34, "q8_0"},
      {DType::Q4_0, 2, 32, 18, "q4_0"},     {DType::Q4_1, 3, 32, 20, "q4_1"},
      {DType::Q5_0, 6, 32, 22, "q5_0"},     {DType::Q5_1, 7, 32, 24, "q5_1"},
      {DType::Q2_K, 10, 256, 84, "q2_k"},   {DType::Q3_K, 11, 256, 110, "q3_k"},
      {DType::Q4_K, 12, 256, 144, "q4_k"},  {DType::Q5_K, 13, 256, 176, "q5_k"},
      {DType::Q6_K, 14, 256, 210, "q6_k"},  {DType::IQ4_NL, 20, 32, 18, "iq4_nl"},
      {DType::IQ4_XS, 23, 256, 136, "iq4_xs"}};
  for (const Want& w : want) {
    CAPTURE(w.name);
    CHECK(dtype_ggml_id(w.t) == w.id);
    CHECK(dtype_block_values(w.t) == w.values);
    CHECK(dtype_block_bytes(w.t) == w.bytes);
    CHECK(std::string(dtype_name(w.t)) == w.name);
    DType back;
    REQUIRE(dtype_from_ggml(w.id, &back));
    CHECK(back == w.t);
    std::string upper = w.name;
    for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    REQUIRE(parse_dtype(upper, &back));
    CHECK(back == w.t);
  }
  DType t;
  for (uint32_t id : {4u, 5u, 9u, 15u, 16u, 17u, 18u, 19u, 21u, 22u, 24u, 29u, 34u, 35u, 36u, 1000u}) {
    CAPTURE(id);
    CHECK_FALSE(dtype_from_ggml(id, &t));  // Q4_2/Q4_3, Q8_1/Q8_K, IQ1-3, integers, TQ*, out of table
  }
  CHECK_FALSE(parse_dtype("q4_2", &t));
  CHECK(dtype_row_ok(DType::Q4_K, 512));
  CHECK_FALSE(dtype_row_ok(DType::Q4_K, 288));
  CHECK(dtype_row_bytes(DType::IQ4_XS, 512) == 272);
}
