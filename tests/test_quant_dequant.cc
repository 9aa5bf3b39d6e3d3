// ctest-labels: kernels asan
// Dequantization of ggml's block types: every tensor of every llama.cpp-made
// tinystories-3M preset file decodes to llama.cpp's float32 values bit for bit
// (sha256 index in ../shared/reference/quant-dequant), and bad rows are refused.
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/quant/dequant.h"
#include "runtime/gguf.h"
#include "tests/sha256.h"
#include "tests/shared_data.h"

using namespace qkv;

namespace {

struct Expected {
  std::string tensor, type, sha256;
};

// The entries of one preset in index.json ({"files": {"PRESET": [{...}, ...]}}).
std::vector<Expected> index_entries(const std::string& json, const std::string& preset) {
  std::vector<Expected> out;
  const size_t key = json.find("\"" + preset + "\": [");  // json.dump(indent=1) spacing
  if (key == std::string::npos) return out;
  size_t i = json.find('[', key), depth = 0, end = i;
  for (; end < json.size(); ++end) {
    if (json[end] == '[') ++depth;
    if (json[end] == ']' && --depth == 0) break;
  }
  const std::string body = json.substr(i, end - i);
  static const std::regex entry(
      R"re("tensor":\s*"([^"]+)",\s*"type":\s*"([^"]+)",[^{}]*?"sha256_f32":\s*"([0-9a-f]{64})")re");
  for (std::sregex_iterator it(body.begin(), body.end(), entry), e; it != e; ++it) {
    out.push_back({(*it)[1], (*it)[2], (*it)[3]});
  }
  return out;
}

}  // namespace

TEST_CASE("every tensor of every llama.cpp preset file dequantizes to llama.cpp's values") {
  const std::string index_rel = "reference/quant-dequant/index.json";
  if (!test::have_shared(index_rel)) return;
  std::ifstream in(test::shared_path(index_rel));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string json = ss.str();
  const char* presets[] = {"F32",    "F16",    "BF16",   "Q8_0",   "Q4_0",   "Q4_1",  "Q5_0",
                           "Q5_1",   "Q2_K",   "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M",
                           "Q5_K_S", "Q5_K_M", "Q6_K",   "IQ4_NL", "IQ4_XS"};
  int files = 0, tensors = 0;
  for (const char* preset : presets) {
    const std::string model = std::string("models/tinystories-3M-") + preset + ".gguf";
    if (!test::have_shared(model)) continue;
    CAPTURE(preset);
    const std::vector<Expected> want = index_entries(json, preset);
    REQUIRE(!want.empty());
    const GGUFFile g = GGUFFile::open(test::shared_path(model));
    REQUIRE(g.tensors().size() == want.size());
    for (const Expected& e : want) {
      CAPTURE(e.tensor);
      const GGUFTensorInfo* t = g.find_tensor(e.tensor);
      REQUIRE(t != nullptr);
      CHECK(ggml_type_name(t->type) == e.type);
      DType type = DType::F32;
      REQUIRE(dtype_from_ggml(t->type, &type));
      const size_t row = static_cast<size_t>(t->ne[0]);
      const size_t rows = static_cast<size_t>(t->n_elements / row);
      std::vector<float> values(t->n_elements);
      for (size_t r = 0; r < rows; ++r) {
        decode_row(type, t->data + r * dtype_row_bytes(type, row), row, values.data() + r * row);
      }
      CHECK(test::sha256_hex(values.data(), values.size() * sizeof(float)) == e.sha256);
      ++tensors;
    }
    ++files;
  }
  MESSAGE(files, " files, ", tensors, " tensors compared");
}

TEST_CASE("sha256 of known strings") {
  CHECK(test::sha256_hex("", 0) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(test::sha256_hex("abc", 3) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string m(1000, 'a');  // several 64-byte chunks
  CHECK(test::sha256_hex(m.data(), m.size()) == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST_CASE("a block-misaligned row is refused with the type named") {
  std::vector<uint8_t> bytes(4096, 0);
  std::vector<float> out(1024);
  for (DType t : {DType::Q4_0, DType::Q5_1, DType::Q4_K, DType::Q6_K, DType::IQ4_XS}) {
    CAPTURE(dtype_name(t));
    const size_t bad = dtype_block_values(t) + 16;
    CHECK_THROWS_WITH_AS(decode_row(t, bytes.data(), bad, out.data()),
                         doctest::Contains(dtype_name(t)), Error);
  }
}

TEST_CASE("hand-made blocks decode as ggml lays them out") {
  SUBCASE("Q4_0: low nibbles are values 0..15, high nibbles 16..31") {
    BlockQ4_0 b{};
    b.d = f32_to_f16(0.5f);
    for (int i = 0; i < 16; ++i) b.qs[i] = static_cast<uint8_t>(i | (15 - i) << 4);
    float y[32];
    dequantize_block(b, y);
    for (int i = 0; i < 16; ++i) {
      CHECK(y[i] == 0.5f * (i - 8));
      CHECK(y[16 + i] == 0.5f * (15 - i - 8));
    }
  }
  SUBCASE("Q5_0: bit k of qh is value k's fifth bit") {
    BlockQ5_0 b{};
    b.d = f32_to_f16(1.0f);
    const uint32_t qh = 0x80000001u;  // values 0 and 31
    std::memcpy(b.qh, &qh, 4);
    float y[32];
    dequantize_block(b, y);
    CHECK(y[0] == 0.0f);    // 16 - 16
    CHECK(y[1] == -16.0f);  // 0 - 16
    CHECK(y[31] == 0.0f);
  }
  SUBCASE("IQ4_XS: scale of sub-block j from scales_l nibble and scales_h bits") {
    BlockIQ4_XS b{};
    b.d = f32_to_f16(1.0f);
    b.scales_l[1] = 0x50;         // sub-block 3: low nibble 5
    b.scales_h = uint16_t(2 << 6);  // sub-block 3: high bits 2 -> 5 | 32 = 37, minus 32 = 5
    b.qs[16 * 3] = 0x0F;          // value 96: table[15] = 113
    float y[256];
    dequantize_block(b, y);
    CHECK(y[96] == 5.0f * 113);
    CHECK(y[97] == 5.0f * -127);
    CHECK(y[0] == -32.0f * -127);
  }
}
