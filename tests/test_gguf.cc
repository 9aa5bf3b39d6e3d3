// ctest-labels: asan
// GGUF reader and writer: round trips of every metadata value type and tensor
// type, and every kind of malformed file giving a clear qkv::Error (never a
// crash or a huge allocation: this suite runs under ASan/UBSan).
#include <doctest/doctest.h>

#include "tests/error_matchers.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

#include "kernels/error.h"
#include "runtime/gguf.h"
#include "runtime/model_loader.h"
#include "runtime/synthetic.h"
#include "tests/shared_data.h"

using namespace qkv;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("qkv_test_gguf_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

GGUFFile parse(const std::vector<uint8_t>& bytes, const std::string& name = "test.gguf") {
  return GGUFFile::parse(bytes.data(), bytes.size(), name);
}

using test::throws_with;

// Hand-built GGUF bytes, for files the writer would refuse to make.
struct Raw {
  std::vector<uint8_t> b;
  template <typename T>
  Raw& put(T v) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  Raw& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Raw& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return put<uint32_t>(version).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  }
  Raw& tensor_info(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) put<uint64_t>(d);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  Raw& pad_to(uint64_t alignment) {
    b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  Raw& zeros(uint64_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

// Two F32 tensors of 8 values (32 bytes) at the given offsets.
std::vector<uint8_t> two_tensors(uint64_t off_a, uint64_t off_b, uint64_t data_bytes = 64) {
  Raw r;
  r.header(2, 0).tensor_info("a", {8}, ggml_type::F32, off_a).tensor_info("b", {8}, ggml_type::F32, off_b);
  return r.pad_to(32).zeros(data_bytes).b;
}

// Rewrites a GGUF file through `edit`, which may change its metadata and
// tensor list (tensor data stays in `src`'s mapping).
struct Editable {
  std::vector<std::pair<std::string, GGUFValue>> kv;
  struct T {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> ne;
    const void* data;
    uint64_t n_bytes;
  };
  std::vector<T> tensors;
};
void rewrite(const GGUFFile& src, const std::string& dst, const std::function<void(Editable&)>& edit,
             uint64_t alignment = 32) {
  Editable e;
  e.kv = src.metadata();
  for (const GGUFTensorInfo& t : src.tensors()) e.tensors.push_back({t.name, t.type, t.ne, t.data, t.n_bytes});
  edit(e);
  GGUFWriter w(3, alignment);
  for (auto& kv : e.kv) {
    if (kv.first != "general.alignment") w.set(kv.first, kv.second);
  }
  for (auto& t : e.tensors) w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes);
  w.write(dst);
}

}  // namespace

namespace {
void fill_every_type(GGUFWriter& w) {
  w.set("u8", GGUFValue::u8(250));
  w.set("i8", GGUFValue::i8(-100));
  w.set("u16", GGUFValue::u16(65000));
  w.set("i16", GGUFValue::i16(-32000));
  w.set("u32", GGUFValue::u32(4000000000u));
  w.set("i32", GGUFValue::i32(-2000000000));
  w.set("u64", GGUFValue::u64(18000000000000000000ull));
  w.set("i64", GGUFValue::i64(-9000000000000000000ll));
  w.set("f32", GGUFValue::f32(3.25f));
  w.set("f64", GGUFValue::f64(-1e300));
  w.set("bool_t", GGUFValue::boolean(true));
  w.set("bool_f", GGUFValue::boolean(false));
  w.set("str", GGUFValue::string("h\xC3\xA9llo"));
  w.set("empty_str", GGUFValue::string(""));
  w.set("arr_f32", GGUFValue::f32_array({1.5f, -2.5f}));
  w.set("arr_i32", GGUFValue::i32_array({-7, 8, 9}));
  w.set("arr_u8", GGUFValue::numeric_array(GGUFType::UINT8, {1, 2, 255}));
  w.set("arr_i64", GGUFValue::numeric_array(GGUFType::INT64, {-5, 1e15}));
  w.set("arr_f64", GGUFValue::numeric_array(GGUFType::FLOAT64, {0.125}));
  w.set("arr_bool", GGUFValue::numeric_array(GGUFType::BOOL, {1, 0, 1}));
  w.set("arr_str", GGUFValue::string_array({"a", "", "\xE2\x96\x81" "b"}));
  w.set("arr_empty", GGUFValue::string_array({}));
  w.set("nested", GGUFValue::array_of_arrays({GGUFValue::i32_array({1, 2}), GGUFValue::string_array({"x"}),
                                              GGUFValue::array_of_arrays({GGUFValue::f32_array({4.0f})})}));
}
}  // namespace

TEST_CASE("every metadata value type round-trips") {
  for (uint32_t version : {2u, 3u}) {
    INFO("version ", version);
    GGUFWriter w(version);
    fill_every_type(w);
    const std::vector<uint8_t> bytes = w.serialize();
    const GGUFFile g = parse(bytes);
    CHECK(g.version() == version);
    CHECK(g.metadata().size() == 23);
    CHECK(g.get("u8").as_int() == 250);
    CHECK(g.get("i8").as_int() == -100);
    CHECK(g.get("u16").as_int() == 65000);
    CHECK(g.get("i16").as_int() == -32000);
    CHECK(g.get("u32").as_uint() == 4000000000u);
    CHECK(g.get("i32").as_int() == -2000000000);
    CHECK(g.get("u64").as_uint() == 18000000000000000000ull);
    CHECK_THROWS_AS(g.get("u64").as_int(), Error);  // does not fit int64
    CHECK(g.get("i64").as_int() == -9000000000000000000ll);
    CHECK_THROWS_AS(g.get("i64").as_uint(), Error);
    CHECK(g.get("f32").as_double() == 3.25);
    CHECK(g.get("f64").as_double() == -1e300);
    CHECK(g.get("bool_t").as_bool());
    CHECK_FALSE(g.get("bool_f").as_bool());
    CHECK(g.get("str").as_string() == "h\xC3\xA9llo");
    CHECK(g.get("empty_str").as_string().empty());
    CHECK_THROWS_AS(g.get("str").as_int(), Error);
    CHECK(g.get("arr_f32").as_f32_vector() == std::vector<float>{1.5f, -2.5f});
    CHECK(g.get("arr_i32").as_int_vector() == std::vector<int64_t>{-7, 8, 9});
    CHECK(g.get("arr_u8").as_int_vector() == std::vector<int64_t>{1, 2, 255});
    CHECK(g.get("arr_i64").as_int_vector() == std::vector<int64_t>{-5, 1000000000000000});
    CHECK(g.get("arr_f64").element(0).as_double() == 0.125);
    CHECK(g.get("arr_bool").element(1).as_bool() == false);
    CHECK(g.get("arr_bool").element(2).as_bool() == true);
    CHECK_THROWS_AS(g.get("arr_bool").element(3), Error);
    CHECK(g.get("arr_str").strings == std::vector<std::string>{"a", "", "\xE2\x96\x81" "b"});
    CHECK(g.get("arr_empty").count == 0);
    const GGUFValue& nested = g.get("nested");
    REQUIRE(nested.items.size() == 3);
    CHECK(nested.items[0].as_int_vector() == std::vector<int64_t>{1, 2});
    CHECK(nested.items[1].strings == std::vector<std::string>{"x"});
    CHECK(nested.items[2].items[0].as_f32_vector() == std::vector<float>{4.0f});
    CHECK(g.find("absent") == nullptr);
    CHECK(throws_with([&] { g.get("absent"); }, "'absent' is missing"));
    // Re-serializing what was read gives the same bytes.
    GGUFWriter again(version);
    for (const auto& kv : g.metadata()) again.set(kv.first, kv.second);
    CHECK(again.serialize() == bytes);
  }
}

TEST_CASE("every tensor type round-trips, aligned") {
  for (uint64_t alignment : {32u, 64u, 8u}) {
    INFO("alignment ", alignment);
    GGUFWriter w(3, alignment);
    std::vector<float> f32(64);
    for (size_t i = 0; i < f32.size(); ++i) f32[i] = 0.25f * float(i) - 3.0f;
    std::vector<uint16_t> f16(96), bf16(40);
    for (size_t i = 0; i < f16.size(); ++i) f16[i] = f32_to_f16(float(i) / 7);
    for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = f32_to_bf16(-float(i) / 3);
    std::vector<BlockQ8_0> q8(6);
    for (size_t b = 0; b < q8.size(); ++b) quantize_q8_0_block(f32.data() + (b % 2) * 32, &q8[b]);
    w.add_tensor("f32", ggml_type::F32, {16, 4}, f32.data(), 256);
    w.add_tensor("f16", ggml_type::F16, {3, 8, 2, 2}, f16.data(), 192);
    w.add_tensor("bf16", ggml_type::BF16, {40}, bf16.data(), 80);
    w.add_tensor("q8", ggml_type::Q8_0, {64, 3}, q8.data(), 6 * 34);
    const std::string path = temp_path("tensors.gguf");
    w.write(path);
    const GGUFFile g = GGUFFile::open(path);
    CHECK(g.alignment() == alignment);
    CHECK(g.data_offset() % alignment == 0);
    REQUIRE(g.tensors().size() == 4);
    struct Expect { const char* name; uint32_t type; std::vector<uint64_t> ne; const void* data; uint64_t bytes; };
    for (const Expect& e : {Expect{"f32", ggml_type::F32, {16, 4}, f32.data(), 256},
                            Expect{"f16", ggml_type::F16, {3, 8, 2, 2}, f16.data(), 192},
                            Expect{"bf16", ggml_type::BF16, {40}, bf16.data(), 80},
                            Expect{"q8", ggml_type::Q8_0, {64, 3}, q8.data(), 204}}) {
      INFO("tensor ", e.name);
      const GGUFTensorInfo* t = g.find_tensor(e.name);
      REQUIRE(t != nullptr);
      CHECK(t->type == e.type);
      CHECK(t->ne == e.ne);
      CHECK(t->n_bytes == e.bytes);
      CHECK(t->offset % alignment == 0);
      CHECK(reinterpret_cast<uintptr_t>(t->data) % alignment == 0);
      CHECK(std::memcmp(t->data, e.data, e.bytes) == 0);
    }
    CHECK(g.find_tensor("nope") == nullptr);
    std::remove(path.c_str());
  }
  CHECK(ggml_type_name(ggml_type::Q4_0) == "Q4_0");
  CHECK(ggml_type_name(ggml_type::Q4_K) == "Q4_K");
  CHECK(ggml_type_name(999) == "unknown type 999");
}

TEST_CASE("writer refuses inconsistent tensors") {
  GGUFWriter w;
  std::vector<uint8_t> buf(1024);
  CHECK_THROWS_AS(w.add_tensor("x", ggml_type::F32, {8}, buf.data(), 31), Error);
  CHECK_THROWS_AS(w.add_tensor("x", ggml_type::Q8_0, {16}, buf.data(), 17), Error);
  w.add_tensor("x", ggml_type::F32, {8}, buf.data(), 32);
  CHECK_THROWS_AS(w.add_tensor("x", ggml_type::F32, {8}, buf.data(), 32), Error);
  CHECK_THROWS_AS(GGUFWriter(3, 24), Error);
  CHECK_THROWS_AS(GGUFWriter(1), Error);
}

TEST_CASE("truncation at every offset is a clear error") {
  // A small model file with metadata of every kind and real tensors: every
  // prefix must fail cleanly, naming the file.
  const Model m = make_synthetic_model(synthetic_preset("tiny"), DType::Q8_0, 1);
  const std::string path = temp_path("full.gguf");
  write_gguf_model(m, path);
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> full((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  const GGUFFile whole = parse(full);
  const uint64_t meta_end = whole.data_offset();
  int checked = 0;
  for (uint64_t cut = 0; cut < full.size(); cut += (cut < meta_end + 64 ? 1 : 4093)) {
    const std::vector<uint8_t> part(full.begin(), full.begin() + cut);
    bool failed_cleanly = false;
    try {
      parse(part, "cut.gguf");
    } catch (const Error& e) {
      failed_cleanly = std::string(e.what()).find("cut.gguf") != std::string::npos;
    }
    if (!failed_cleanly) {
      FAIL_CHECK("cut at ", cut, " did not fail with an error naming the file");
      break;
    }
    ++checked;
  }
  CHECK(checked > 1000);
}

TEST_CASE("wrong magic and unsupported versions") {
  Raw r;
  r.header(0, 0);
  std::vector<uint8_t> bytes = r.b;
  CHECK(parse(bytes).tensors().empty());
  bytes[0] = 'X';
  CHECK(throws_with([&] { parse(bytes); }, "wrong magic"));
  CHECK(throws_with([&] { parse({}); }, "wrong magic"));
  for (uint32_t version : {0u, 1u, 4u, 0x03000000u}) {
    Raw v;
    v.header(0, 0, version);
    INFO("version ", version);
    CHECK(throws_with([&] { parse(v.b); }, "unsupported version " + std::to_string(version)));
  }
  // Through the file path: the error names the file.
  const std::string path = temp_path("magic.gguf");
  write_bytes(path, {'G', 'G', 'U', 'F', 1, 0, 0, 0});
  CHECK(throws_with([&] { GGUFFile::open(path); }, path));
  CHECK(throws_with([&] { load_model(path); }, "unsupported version 1"));
  std::remove(path.c_str());
}

TEST_CASE("absurd counts and lengths are rejected before allocating") {
  SUBCASE("2^60 tensors") {
    Raw r;
    r.header(uint64_t(1) << 60, 0);
    CHECK(throws_with([&] { parse(r.b); }, "tensor count"));
  }
  SUBCASE("2^60 metadata entries") {
    Raw r;
    r.header(0, uint64_t(1) << 60);
    CHECK(throws_with([&] { parse(r.b); }, "metadata count"));
  }
  SUBCASE("a 2^40-byte string") {
    Raw r;
    r.header(0, 1).str("key").put<uint32_t>(8).put<uint64_t>(uint64_t(1) << 40).zeros(16);
    CHECK(throws_with([&] { parse(r.b); }, "string value needs 1099511627776 bytes"));
  }
  SUBCASE("a 2^40-byte key") {
    Raw r;
    r.header(0, 1).put<uint64_t>(uint64_t(1) << 40).zeros(16);
    CHECK(throws_with([&] { parse(r.b); }, "metadata key needs 1099511627776 bytes"));
  }
  SUBCASE("a key longer than the 65535-byte limit") {
    Raw r;
    r.header(0, 1).str(std::string(70000, 'k')).put<uint32_t>(4).put<uint32_t>(1);
    CHECK(throws_with([&] { parse(r.b); }, "more than the limit of 65535"));
  }
  SUBCASE("arrays of 2^60 numbers, strings, arrays") {
    for (uint32_t et : {0u, 6u, 12u, 8u, 9u}) {
      Raw r;
      r.header(0, 1).str("arr").put<uint32_t>(9).put<uint32_t>(et).put<uint64_t>(uint64_t(1) << 60).zeros(64);
      INFO("element type ", et);
      CHECK(throws_with([&] { parse(r.b); }, "array of"));
    }
  }
  SUBCASE("deeply nested arrays") {
    Raw r;
    r.header(0, 1).str("deep").put<uint32_t>(9);
    for (int i = 0; i < 10; ++i) r.put<uint32_t>(9).put<uint64_t>(1);
    r.put<uint32_t>(0).put<uint64_t>(0);
    CHECK(throws_with([&] { parse(r.b); }, "nested deeper"));
  }
  SUBCASE("unknown value types") {
    Raw r;
    r.header(0, 1).str("k").put<uint32_t>(13).zeros(8);
    CHECK(throws_with([&] { parse(r.b); }, "unknown value type 13"));
    Raw a;
    a.header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(77).put<uint64_t>(0);
    CHECK(throws_with([&] { parse(a.b); }, "unknown array element type 77"));
  }
  SUBCASE("bad bools") {
    Raw r;
    r.header(0, 1).str("k").put<uint32_t>(7).put<uint8_t>(2);
    CHECK(throws_with([&] { parse(r.b); }, "bool"));
  }
  SUBCASE("huge tensor dimensions") {
    Raw r;
    r.header(1, 0).tensor_info("t", {uint64_t(1) << 40, uint64_t(1) << 40}, ggml_type::F32, 0).pad_to(32).zeros(64);
    CHECK(throws_with([&] { parse(r.b); }, "impossible dimension"));
    Raw z;
    z.header(1, 0).tensor_info("t", {8, 0}, ggml_type::F32, 0).pad_to(32).zeros(64);
    CHECK(throws_with([&] { parse(z.b); }, "impossible dimension 0"));
    Raw d;
    d.header(1, 0).tensor_info("t", {1, 1, 1, 1, 1}, ggml_type::F32, 0).pad_to(32).zeros(64);
    CHECK(throws_with([&] { parse(d.b); }, "5 dimensions"));
  }
}

TEST_CASE("tensor layout errors") {
  CHECK(parse(two_tensors(0, 32)).tensors().size() == 2);
  CHECK(throws_with([&] { parse(two_tensors(0, 32, 63)); }, "'b' data"));              // data past EOF
  CHECK(throws_with([&] { parse(two_tensors(0, 32, 63)); }, "past the end"));
  CHECK(throws_with([&] { parse(two_tensors(0, uint64_t(-32))); }, "past the end"));    // offset overflow
  CHECK(throws_with([&] { parse(two_tensors(0, 0)); }, "overlap"));
  {
    // 'a' is 64 bytes at 0, 'b' starts inside it at 32.
    Raw r;
    r.header(2, 0).tensor_info("a", {16}, ggml_type::F32, 0).tensor_info("b", {8}, ggml_type::F32, 32);
    r.pad_to(32).zeros(96);
    CHECK(throws_with([&] { parse(r.b); }, "tensors 'a' and 'b' overlap"));
  }
  CHECK(throws_with([&] { parse(two_tensors(0, 40)); }, "not a multiple of the alignment 32"));
  {
    Raw r;
    r.header(2, 0).tensor_info("a", {8}, ggml_type::F32, 0).tensor_info("a", {8}, ggml_type::F32, 32);
    r.pad_to(32).zeros(64);
    CHECK(throws_with([&] { parse(r.b); }, "duplicate tensor name 'a'"));
  }
  {
    Raw r;
    r.header(0, 2).str("k").put<uint32_t>(4).put<uint32_t>(1).str("k").put<uint32_t>(4).put<uint32_t>(2);
    CHECK(throws_with([&] { parse(r.b); }, "duplicate metadata key 'k'"));
  }
  {
    // Q8_0 rows must hold whole blocks of 32.
    Raw r;
    r.header(1, 0).tensor_info("q", {48}, ggml_type::Q8_0, 0).pad_to(32).zeros(64);
    CHECK(throws_with([&] { parse(r.b); }, "not a multiple of its block of 32"));
  }
  {
    // general.alignment must be a u32 power of two; 64 moves the data start.
    Raw bad;
    bad.header(0, 1).str("general.alignment").put<uint32_t>(4).put<uint32_t>(48);
    CHECK(throws_with([&] { parse(bad.b); }, "not a power of two"));
    Raw wrong_type;
    wrong_type.header(0, 1).str("general.alignment").put<uint32_t>(10).put<uint64_t>(64);
    CHECK(throws_with([&] { parse(wrong_type.b); }, "must be a u32"));
  }
  {
    // Tensor data would start past the end of the file.
    Raw r;
    r.header(1, 0).tensor_info("a", {8}, ggml_type::F32, 0);
    CHECK(throws_with([&] { parse(r.b); }, "truncated"));
  }
}

TEST_CASE("model-level GGUF errors: architecture, missing tensors, shapes, types") {
  const Model m = make_synthetic_model(synthetic_preset("tiny"), DType::F16, 2);
  const std::string good = temp_path("model.gguf");
  const std::string bad = temp_path("model_bad.gguf");
  write_gguf_model(m, good);
  const GGUFFile src = GGUFFile::open(good);
  CHECK(load_model(good).config.n_layers == 2);

  auto set_kv = [](Editable& e, const std::string& key, GGUFValue v) {
    for (auto& kv : e.kv) {
      if (kv.first == key) kv.second = std::move(v);
    }
  };
  auto find_t = [](Editable& e, const std::string& name) -> Editable::T& {
    for (auto& t : e.tensors) {
      if (t.name == name) return t;
    }
    FAIL("no tensor ", name);
    return e.tensors[0];
  };

  rewrite(src, bad, [&](Editable& e) { set_kv(e, "general.architecture", GGUFValue::string("mamba")); });
  CHECK(throws_with([&] { load_model(bad); }, "architecture 'mamba' is not supported"));

  rewrite(src, bad, [&](Editable& e) {
    e.kv.erase(std::remove_if(e.kv.begin(), e.kv.end(), [](auto& kv) { return kv.first == "llama.block_count"; }),
               e.kv.end());
  });
  CHECK(throws_with([&] { load_model(bad); }, "'llama.block_count' is missing"));

  rewrite(src, bad, [&](Editable& e) {
    e.tensors.erase(std::remove_if(e.tensors.begin(), e.tensors.end(),
                                   [](auto& t) { return t.name == "blk.1.ffn_up.weight"; }),
                    e.tensors.end());
  });
  CHECK(throws_with([&] { load_model(bad); }, "required tensor 'blk.1.ffn_up.weight' is missing"));
  CHECK(throws_with([&] { load_model(bad); }, bad));

  // A shape that disagrees with the config: attn_k as [64, 64] instead of [64, 32].
  std::vector<uint16_t> big(64 * 64);
  rewrite(src, bad, [&](Editable& e) {
    Editable::T& t = find_t(e, "blk.0.attn_k.weight");
    t.ne = {64, 64};
    t.data = big.data();
    t.n_bytes = big.size() * 2;
  });
  CHECK(throws_with([&] { load_model(bad); }, "tensor 'blk.0.attn_k.weight' has shape [64, 64]"));

  // The config disagreeing with the tensors: head_count_kv 4 makes attn_k [64][64].
  rewrite(src, bad, [&](Editable& e) { set_kv(e, "llama.attention.head_count_kv", GGUFValue::u32(4)); });
  CHECK(throws_with([&] { load_model(bad); }, "has shape [64, 32] but the config needs [64, 64]"));

  // Heads that do not divide: clear config error.
  rewrite(src, bad, [&](Editable& e) { set_kv(e, "llama.attention.head_count_kv", GGUFValue::u32(3)); });
  CHECK(throws_with([&] { load_model(bad); }, "n_kv_heads"));

  // A key of the wrong type.
  rewrite(src, bad, [&](Editable& e) { set_kv(e, "llama.embedding_length", GGUFValue::string("64")); });
  CHECK(throws_with([&] { load_model(bad); }, "must be an integer"));

  // IQ2_XXS is a valid GGUF tensor type that qkv cannot compute with; 200 is
  // past ggml's type table. Both are refused naming the tensor and the type.
  std::vector<uint8_t> q2(32 * 64 / 256 * 66);
  for (const auto& [type, name] : {std::pair<uint32_t, const char*>{16, "IQ2_XXS"}, {200, "unknown type 200"}}) {
    rewrite(src, bad, [&, type = type](Editable& e) {
      Editable::T& t = find_t(e, "blk.1.attn_v.weight");
      t.type = type;
      t.data = q2.data();
      t.n_bytes = q2.size();
    });
    CHECK(throws_with([&] { load_model(bad); }, std::string("tensor 'blk.1.attn_v.weight' has type ") + name));
  }

  // With general.alignment 1 the tensors land at odd addresses: the loader
  // copies those into aligned memory and the values are unchanged.
  // (the 15-byte key "pp" = u8 flips the parity of the data start).
  rewrite(src, bad, [](Editable& e) { e.kv.emplace_back("pp", GGUFValue::u8(0)); }, 1);
  {
    const GGUFFile g1 = GGUFFile::open(bad);
    CHECK(g1.alignment() == 1);
    bool any_odd = false;
    for (const GGUFTensorInfo& t : g1.tensors()) any_odd |= reinterpret_cast<uintptr_t>(t.data) % 2 != 0;
    CHECK(any_odd);
    const Model m1 = load_model(bad);
    const std::vector<std::pair<const Matrix*, const Matrix*>> pairs = {
        {&m1.token_embd, &m.token_embd}, {&m1.layers[0].wq, &m.layers[0].wq},
        {&m1.layers[1].ffn_down, &m.layers[1].ffn_down}, {&m1.layers[1].attn_norm, &m.layers[1].attn_norm}};
    for (const auto& p : pairs) {
      CHECK(reinterpret_cast<uintptr_t>(p.first->data) % (p.first->type == DType::F32 ? 4 : 2) == 0);
      CHECK(std::memcmp(p.first->data, p.second->data, p.first->rows * dtype_row_bytes(p.first->type, p.first->cols)) == 0);
    }
  }

  // A vocabulary-only file is not a model.
  if (qkv::test::have_shared("models/llama-spm-vocab.gguf")) {
    CHECK(throws_with([&] { load_model(qkv::test::shared_path("models/llama-spm-vocab.gguf")); }, "no tensors"));
  }
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

TEST_CASE("the shared GGUF files parse") {
  if (!qkv::test::have_shared("models/stories260K.gguf")) return;
  const GGUFFile g = GGUFFile::open(qkv::test::shared_path("models/stories260K.gguf"));
  CHECK(g.version() == 3);
  CHECK(g.get("general.architecture").as_string() == "llama");
  CHECK(g.find_tensor("token_embd.weight") != nullptr);
  CHECK(g.get("tokenizer.ggml.tokens").count == 512);
}
