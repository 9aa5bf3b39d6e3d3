// qkv info MODEL: what a model file holds (format, shape, tensor types,
// parameters, KV-cache cost per token); qkv info --cpu: this machine's SIMD targets
// and the batched-decode GEMM kernel they select, under an ISA cap (--isa) if asked.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <sys/stat.h>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/linear.h"
#include "kernels/machine/arm_features.h"
#include "kernels/machine/cpu_features.h"
#include "kernels/machine/isa_cap.h"
#include "kernels/quant/row_groups.h"
#include "kernels/quant/vec_dot_arm_dotprod.h"
#include "kernels/quant/vec_dot_avxvnni.h"
#include "kernels/simd_target.h"
#include "kernels/threads/cores.h"
#include "kernels/threads/wait.h"
#include "runtime/arch.h"
#include "runtime/gguf.h"
#include "runtime/model_loader.h"
#include "tools/commands.h"

namespace qkv::tools {

namespace {

const char* yes_no(bool b) { return b ? "yes" : "no"; }

// `isa`: the --isa level to cap at first (nullptr: QKV_ISA's, if any).
int print_cpu(const char* isa) {
  if (isa != nullptr) set_isa_cap(parse_isa_level(isa), "--isa");
  const std::optional<IsaLevel> cap = isa_cap();
  std::printf("isa cap: %s%s%s%s; levels this CPU and build can run: %s\n",
              cap.has_value() ? isa_level_name(*cap) : "none", cap.has_value() ? " (" : "",
              cap.has_value() ? isa_cap_source() : "", cap.has_value() ? ")" : "", host_isa_levels().c_str());
  std::printf("simd target: %s\ncompiled targets (supported here): %s\n", simd_target_name(),
              simd_compiled_targets().c_str());
  const CpuFeatures& f = cpu_features();
  const CpuFeatures& h = host_cpu_features();
  std::printf("cpu: %s; AVX2 %s, AVX-VNNI %s; AVX-512 %s, VNNI %s, BF16 %s; AMX-BF16 %s, AMX-INT8 %s%s\n",
              f.intel ? "Intel" : f.amd ? "AMD" : "other vendor", yes_no(f.avx2), yes_no(f.avx_vnni),
              yes_no(f.avx512), yes_no(f.avx512_vnni), yes_no(f.avx512_bf16), yes_no(f.amx_bf16), yes_no(f.amx_int8),
              cap.has_value() ? " (under the cap)" : "");
  if (cap.has_value()) {
    std::printf("cpu without the cap: AVX2 %s, AVX-VNNI %s; AVX-512 %s, VNNI %s, BF16 %s; AMX-BF16 %s, AMX-INT8 %s\n",
                yes_no(h.avx2), yes_no(h.avx_vnni), yes_no(h.avx512), yes_no(h.avx512_vnni), yes_no(h.avx512_bf16),
                yes_no(h.amx_bf16), yes_no(h.amx_int8));
  }
#if defined(__x86_64__)
  std::printf("AVX-VNNI block kernels: %s\n", avxvnni_status());
#endif
  std::string grouped;
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL}) {
    if (row_groups_chosen(t)) grouped += std::string(grouped.empty() ? "" : ", ") + dtype_name(t);
  }
  std::printf("row groups (decode matvec on 16 interleaved rows): %s\n",
              grouped.empty() ? "none (every matrix in rows)" : grouped.c_str());
#if defined(__aarch64__)
  // The x86 line above has nothing to say here; this is what the ARM core runs.
  std::printf("arm: %s\n", describe_arm_features(arm_features()).c_str());
  std::printf("block-type matvec (decode): Q4_0/Q4_1/IQ4_NL: %s; Q4_K/Q6_K: %s; Q5_0/Q5_1/Q2_K/Q3_K/Q5_K/IQ4_XS: %s\n",
              arm_matvec_kernel_name(DType::Q4_0), arm_matvec_kernel_name(DType::Q4_K),
              arm_matvec_kernel_name(DType::Q5_0));
#endif
  std::printf("batched-decode GEMM (2-16 sequences): F16/BF16 weights: %s; F32 weights: %s; "
              "K-quants/IQ4_XS: %s; Q4_0/Q8_0/32-value blocks: %s\n",
              matmul_small_kernel_name(DType::F16), matmul_small_kernel_name(DType::F32),
              matmul_small_kernel_name(DType::Q4_K), matmul_small_kernel_name(DType::Q4_0));
  std::printf("prefill GEMM (over 16 tokens): F16/BF16 weights: %s; F32 weights: %s; "
              "K-quants/IQ4_XS: %s; Q4_0/Q8_0/32-value blocks: %s\n",
              prefill_gemm_kernel_name(DType::F16), prefill_gemm_kernel_name(DType::F32),
              prefill_gemm_kernel_name(DType::Q4_K), prefill_gemm_kernel_name(DType::Q4_0));
  std::printf("oneDNN ISA: %s\n", onednn_cpu_isa_name());
  const char* omp_policy = std::getenv("OMP_WAIT_POLICY");
  const char* omp_spin = std::getenv("GOMP_SPINCOUNT");
  std::printf("threads: %d by default (physical cores here); waits spin %d us, then block (--poll); "
              "OpenMP: OMP_WAIT_POLICY=%s GOMP_SPINCOUNT=%s\n",
              physical_cores(), wait_poll(), omp_policy != nullptr ? omp_policy : "(unset)",
              omp_spin != nullptr ? omp_spin : "(unset)");
  return 0;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

// A GGUF that qkv cannot run (another architecture, an unsupported tensor
// type, a vocabulary-only file): what the file itself says, then why.
int print_unloadable_gguf(const GGUFFile& g, const std::string& format_desc, const std::string& tokenizer_desc,
                          const char* why) {
  std::printf("file:            %s\n", g.path().c_str());
  std::printf("format:          %s\n", format_desc.c_str());
  std::printf("file size:       %llu bytes (%s)\n", static_cast<unsigned long long>(g.file_size()),
              human_bytes(double(g.file_size())).c_str());
  if (const GGUFValue* a = g.find("general.architecture"); a && a->type == GGUFType::STRING) {
    std::printf("architecture:    %s\n", a->str.c_str());
  }
  std::printf("tokenizer:       %s\n", tokenizer_desc.c_str());
  std::map<std::string, int> types;
  uint64_t elements = 0;
  for (const GGUFTensorInfo& t : g.tensors()) {
    ++types[ggml_type_name(t.type)];
    elements += t.n_elements;
  }
  std::string list;
  for (const auto& tc : types) list += (list.empty() ? "" : ", ") + tc.first + " x" + std::to_string(tc.second);
  std::printf("tensor types:    %s\n", list.empty() ? "(no tensors)" : list.c_str());
  std::printf("parameters:      %llu (all tensors)\n", static_cast<unsigned long long>(elements));
  std::fprintf(stderr, "qkv info: this file cannot be run by qkv: %s\n", why);
  return 1;
}

int print_model(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail("cannot open '", path, "'");
  const ModelFormat format = detect_model_format(path);
  std::string format_desc = "llama2.c checkpoint (legacy version 0)";
  std::string tokenizer_desc = "none (llama2.c checkpoints need a tokenizer.bin, -z)";
  Model m;
  if (format == ModelFormat::GGUF) {
    const GGUFFile g = GGUFFile::open(path);
    format_desc = "GGUF v" + std::to_string(g.version()) + " (" + std::to_string(g.tensors().size()) +
                  " tensors, " + std::to_string(g.metadata().size()) + " metadata keys, alignment " +
                  std::to_string(g.alignment()) + ")";
    if (const GGUFValue* name = g.find("general.name"); name && name->type == GGUFType::STRING) {
      format_desc += ", name \"" + name->str + "\"";
    }
    if (const GGUFValue* tm = g.find("tokenizer.ggml.model"); tm && tm->type == GGUFType::STRING) {
      const GGUFValue* toks = g.find("tokenizer.ggml.tokens");
      tokenizer_desc = "'" + tm->str + "', " + std::to_string(toks ? toks->count : 0) + " tokens";
    } else {
      tokenizer_desc = "none in the file";
    }
    try {
      m = load_gguf_model(g);
    } catch (const Error& e) {
      return print_unloadable_gguf(g, format_desc, tokenizer_desc, e.what());
    }
  } else {
    m = load_llama2c_model(path);
  }
  const ModelConfig& c = m.config;
  const bool tied = m.output.data == m.token_embd.data;

  std::map<DType, int> type_counts;
  auto count = [&](const Matrix& w) { ++type_counts[w.type]; };
  for (const Matrix* w : weight_matrices(m)) count(*w);
  std::string types;
  for (const auto& [t, n] : type_counts) {
    // Bits per weight of the type's storage (a Q4_K block: 144 bytes for 256 values = 4.5).
    char bpw[32];
    std::snprintf(bpw, sizeof(bpw), " (%.2f bpw)", 8.0 * double(dtype_block_bytes(t)) / double(dtype_block_values(t)));
    types += (types.empty() ? "" : ", ") + std::string(dtype_name(t)) + " x" + std::to_string(n) + bpw;
  }

  std::printf("file:            %s\n", path.c_str());
  std::printf("format:          %s\n", format_desc.c_str());
  std::printf("file size:       %lld bytes (%s)\n", static_cast<long long>(st.st_size),
              human_bytes(double(st.st_size)).c_str());
  std::printf("architecture:    %s\n", c.architecture.c_str());
  std::printf("dim:             %lld\n", static_cast<long long>(c.dim));
  std::printf("ffn dim:         %lld\n", static_cast<long long>(c.hidden_dim));
  std::printf("layers:          %lld\n", static_cast<long long>(c.n_layers));
  std::printf("heads:           %lld query, %lld key/value (group %lld)\n", static_cast<long long>(c.n_heads),
              static_cast<long long>(c.n_kv_heads), static_cast<long long>(c.n_heads / c.n_kv_heads));
  if (c.learned_positions) {
    std::printf("head dim:        %lld\n", static_cast<long long>(c.head_dim));
  } else {
    std::printf("head dim:        %lld (rope on %lld, base %g)\n", static_cast<long long>(c.head_dim),
                static_cast<long long>(c.rope_dim), double(c.rope_theta));
  }
  if (c.q_dim() != c.dim) std::printf("query width:     %lld (heads x head dim)\n", static_cast<long long>(c.q_dim()));
  for (const std::string& line : describe_arch(c)) std::printf("%s\n", line.c_str());
  std::printf("norm epsilon:    %g\n", double(c.norm_eps));
  std::printf("context length:  %lld\n", static_cast<long long>(c.context_length));
  std::printf("vocabulary:      %lld\n", static_cast<long long>(c.vocab_size));
  std::printf("tokenizer:       %s\n", tokenizer_desc.c_str());
  std::printf("output:          %s\n", !c.causal ? "the final hidden states (an encoder)"
                                       : tied     ? "tied to the token embedding"
                                                  : "separate matrix");
  std::printf("tensor types:    %s\n", types.c_str());
  std::printf("parameters:      %llu (%.1fM)\n", static_cast<unsigned long long>(m.parameter_count()),
              double(m.parameter_count()) * 1e-6);
  std::printf("weight bytes:    %llu (%s, %.2f bits per weight)\n", static_cast<unsigned long long>(m.weight_bytes()),
              human_bytes(double(m.weight_bytes())).c_str(),
              m.parameter_count() ? 8.0 * double(m.weight_bytes()) / double(m.parameter_count()) : 0.0);
  if (!c.causal) return 0;  // an encoder keeps no KV cache
  // Per token: K and V, every layer, n_kv_heads rows of head_dim values.
  std::printf("KV cache per token (K+V, all layers):\n");
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    if (!dtype_row_ok(t, size_t(c.head_dim))) {
      std::printf("  %-5s n/a (head dim %lld is not a multiple of %zu)\n", dtype_name(t),
                  static_cast<long long>(c.head_dim), dtype_block_values(t));
      continue;
    }
    const uint64_t per_token = 2 * uint64_t(c.n_layers) * uint64_t(c.n_kv_heads) * dtype_row_bytes(t, size_t(c.head_dim));
    std::printf("  %-5s %llu bytes (%s for the full %lld-token context)\n", dtype_name(t),
                static_cast<unsigned long long>(per_token),
                human_bytes(double(per_token) * double(c.context_length)).c_str(),
                static_cast<long long>(c.context_length));
  }
  return 0;
}

}  // namespace

int cmd_info(int argc, char** argv) {
  const char* usage = "usage: qkv info --cpu [--isa LEVEL] | qkv info MODEL\n";
  if (argc == 2 && std::strcmp(argv[1], "--cpu") == 0) return print_cpu(nullptr);
  if (argc == 4 && std::strcmp(argv[1], "--cpu") == 0 && std::strcmp(argv[2], "--isa") == 0) {
    try {
      return print_cpu(argv[3]);
    } catch (const Error& e) {
      std::fprintf(stderr, "qkv info: %s\n", e.what());
      return 2;
    }
  }
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf("%s  --isa LEVEL  with --cpu: what capping the kernels at LEVEL gives (%s)\n", usage,
                isa_level_names().c_str());
    return 0;
  }
  if (argc == 2 && argv[1][0] != '-') return print_model(argv[1]);
  std::fprintf(stderr, "%s", usage);
  return 2;
}

}  // namespace qkv::tools
