// runtime/quantize_model.h (qkv quantize) against llama-quantize: the shared
// tinystories-3M-F32.gguf quantized with every preset gives each tensor the
// type and bytes of llama.cpp's file for that preset (differing blocks are
// reported as a fraction per tensor), and the whole file equals llama.cpp's.
// Bad input: not a GGUF file, a missing input, an unwritable output, a full
// disk (a file-size limit), rows that cannot take the type.
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/quant/quantize.h"
#include "runtime/gguf.h"
#include "runtime/quantize_model.h"
#include "tests/error_matchers.h"
#include "tests/shared_data.h"

using namespace qkv;

namespace {

const char* const kPresets[] = {"Q4_0",   "Q4_1",   "Q5_0",   "Q5_1",   "Q8_0",   "Q2_K",
                                "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S",
                                "Q5_K_M", "Q6_K",   "IQ4_NL", "IQ4_XS", "F16",    "BF16"};

// On tmpfs where there is one: every output is fsynced, which costs seconds
// per file on a busy disk.
std::string out_dir() {
  struct stat st;
  const std::string base = ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : QKV_BINARY_DIR;
  const std::string d = base + "/test_quantize_file." + std::to_string(::getpid());
  ::mkdir(d.c_str(), 0755);
  return d;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

const QuantPreset& preset(const char* name) {
  const QuantPreset* p = find_quant_preset(name);
  REQUIRE(p != nullptr);
  return *p;
}

QuantizeOptions quiet(int threads = 2) {
  QuantizeOptions o;
  o.threads = threads;
  o.log = nullptr;
  return o;
}

// A small llama GGUF with F32 tensors of the given row lengths (2 rows each).
void write_model(const std::string& path, const std::vector<std::pair<std::string, uint64_t>>& tensors,
                 std::vector<std::vector<float>>* values) {
  GGUFWriter w;
  w.set("general.architecture", GGUFValue::string("llama"));
  w.set("llama.block_count", GGUFValue::u32(1));
  w.set("llama.attention.head_count", GGUFValue::u32(4));
  w.set("llama.attention.head_count_kv", GGUFValue::u32(2));
  values->clear();
  for (const auto& [name, row] : tensors) {
    std::vector<float> v(row * 2);
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37f * float(i + 1) + float(name.size()));
    values->push_back(std::move(v));
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    w.add_tensor(tensors[i].first, ggml_type::F32, {tensors[i].second, 2}, (*values)[i].data(), (*values)[i].size() * 4);
  }
  w.write(path);
}

}  // namespace

TEST_CASE("every preset of tinystories-3M-F32 gives llama-quantize's types, bytes and file") {
  const std::string src_rel = "models/tinystories-3M-F32.gguf";
  if (!test::have_shared(src_rel)) return;
  const std::string dir = out_dir();
  int presets = 0;
  for (const char* name : kPresets) {
    const std::string ref_rel = std::string("models/tinystories-3M-") + name + ".gguf";
    if (!test::have_shared(ref_rel)) continue;
    CAPTURE(name);
    const std::string out = dir + "/" + name + ".gguf";
    const QuantizeSummary s = quantize_gguf(test::shared_path(src_rel), out, preset(name), quiet());
    CHECK(s.tensors == 39);
    const GGUFFile ours = GGUFFile::open(out), ref = GGUFFile::open(test::shared_path(ref_rel));
    REQUIRE(ours.tensors().size() == ref.tensors().size());
    for (size_t i = 0; i < ref.tensors().size(); ++i) {
      const GGUFTensorInfo &a = ours.tensors()[i], &b = ref.tensors()[i];
      CAPTURE(b.name);
      CHECK(a.name == b.name);
      CHECK(ggml_type_name(a.type) == ggml_type_name(b.type));
      REQUIRE(a.n_bytes == b.n_bytes);
      uint64_t bv = 1, bb = 1;
      REQUIRE(ggml_type_layout(b.type, &bv, &bb));
      size_t differing = 0;
      for (uint64_t off = 0; off < b.n_bytes; off += bb) differing += std::memcmp(a.data + off, b.data + off, bb) != 0;
      INFO(differing, " of ", b.n_bytes / bb, " blocks differ (", 100.0 * double(differing) * double(bb) / double(b.n_bytes),
           "%)");
      CHECK(differing == 0);
    }
    CHECK(ours.metadata().size() == ref.metadata().size());
    for (size_t i = 0; i < std::min(ours.metadata().size(), ref.metadata().size()); ++i) {
      CHECK(ours.metadata()[i].first == ref.metadata()[i].first);
    }
    CHECK(ours.find("general.file_type")->as_uint() == quant_preset_file_type(preset(name)));
    CHECK(slurp(out) == slurp(test::shared_path(ref_rel)));
    ::unlink(out.c_str());
    ++presets;
  }
  MESSAGE(presets, " presets compared with llama.cpp's files");
  ::rmdir(dir.c_str());
}

TEST_CASE("rows a type cannot hold fall back as llama-quantize does, or fail when it has no fallback") {
  const std::string dir = out_dir(), in = dir + "/odd.gguf", out = dir + "/odd-q.gguf";
  std::vector<std::vector<float>> values;
  write_model(in, {{"token_embd.weight", 96}, {"output.weight", 64}, {"blk.0.attn_v.weight", 96},
                   {"blk.0.ffn_down.weight", 100}, {"blk.0.attn_norm.weight", 8}},
              &values);
  const QuantizeSummary s = quantize_gguf(in, out, preset("q4_k_m"), quiet(1));
  CHECK(s.fallbacks == 3);
  const GGUFFile g = GGUFFile::open(out);
  auto type_of = [&](const char* name) {
    const GGUFTensorInfo* t = g.find_tensor(name);
    REQUIRE(t != nullptr);
    return ggml_type_name(t->type);
  };
  CHECK(type_of("token_embd.weight") == "Q5_0");      // Q4_K -> Q5_0
  CHECK(type_of("output.weight") == "Q8_0");          // the output rule for rows of 64
  CHECK(type_of("blk.0.attn_v.weight") == "Q8_0");    // use_more_bits layer: Q6_K -> Q8_0
  CHECK(type_of("blk.0.ffn_down.weight") == "F16");   // Q6_K -> Q8_0 does not fit 100 either
  CHECK(type_of("blk.0.attn_norm.weight") == "F32");  // 2-D here, but a norm is never quantized
  // The bytes are the quantizer's for these values.
  std::vector<uint8_t> want(2 * dtype_row_bytes(DType::Q5_0, 96));
  for (int r = 0; r < 2; ++r) {
    quantize_row(DType::Q5_0, values[0].data() + r * 96, 96, want.data() + r * dtype_row_bytes(DType::Q5_0, 96));
  }
  const GGUFTensorInfo* te = g.find_tensor("token_embd.weight");
  REQUIRE(te->n_bytes == want.size());
  CHECK(std::memcmp(te->data, want.data(), want.size()) == 0);

  // Q4_0 has no fallback for rows of 100: an error naming the tensor, and no output.
  const std::string out2 = dir + "/odd-q4_0.gguf";
  CHECK(test::throws_with([&] { quantize_gguf(in, out2, preset("Q4_0"), quiet()); },
                          "tensor 'blk.0.ffn_down.weight' has rows of 100 values"));
  CHECK_FALSE(exists(out2));
  ::unlink(out.c_str());
  ::unlink(in.c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("bad inputs and outputs are clear errors and leave no output") {
  const std::string dir = out_dir(), out = dir + "/never.gguf";
  CHECK(test::throws_with([&] { quantize_gguf(dir + "/missing.gguf", out, preset("Q8_0"), quiet()); },
                          "missing.gguf"));
  const std::string text = dir + "/text.gguf";
  std::ofstream(text) << "this is not a model file, just some text\n";
  CHECK(test::throws_with([&] { quantize_gguf(text, out, preset("Q8_0"), quiet()); }, "is not a GGUF file"));
  CHECK_FALSE(exists(out));

  std::vector<std::vector<float>> values;
  const std::string in = dir + "/small.gguf";
  write_model(in, {{"token_embd.weight", 256}, {"blk.0.attn_q.weight", 256}}, &values);
  CHECK(test::throws_with([&] { quantize_gguf(in, dir + "/no/such/dir/out.gguf", preset("Q8_0"), quiet()); },
                          "no/such/dir/out.gguf"));

  // A full disk, as a file-size limit: the write fails, nothing is left.
  struct rlimit saved;
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 1000;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  bool failed = false;
  try {
    quantize_gguf(in, out, preset("F16"), quiet());
  } catch (const Error& e) {
    failed = std::string(e.what()).find("never.gguf") != std::string::npos;
    INFO(e.what());
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  CHECK(failed);
  CHECK_FALSE(exists(out));
  CHECK_FALSE(exists(out + ".tmp." + std::to_string(::getpid())));

  // A model without an architecture cannot be planned.
  GGUFWriter w;
  w.add_tensor("blk.0.attn_q.weight", ggml_type::F32, {256, 2}, values[1].data(), 256 * 2 * 4);
  const std::string bare = dir + "/bare.gguf";
  w.write(bare);
  CHECK(test::throws_with([&] { quantize_gguf(bare, out, preset("Q8_0"), quiet()); }, "general.architecture"));
  for (const std::string& f : {text, in, bare}) ::unlink(f.c_str());
  ::rmdir(dir.c_str());
}
