// The ISA cap: the highest instruction-set level qkv's kernels may use, so
// that every path (AVX2, AVX-512 without VNNI, ...) runs and can be compared on
// one machine. Set by QKV_ISA=LEVEL in the environment, read before main by
// every process that links the kernels (library, CLI, server, tests), or by
// set_isa_cap (qkv bench --isa) before the first kernel runs. A cap limits
// three things together: the Highway target the dynamic dispatch picks
// (hwy::DisableTargets), the features cpu_features() reports (VNNI,
// AVX512_BF16, AMX: the kernels' own choices), and oneDNN's ISA
// (dnnl::set_max_cpu_isa).
//
// A QKV_ISA that cannot be honoured (not a level, an ARM level on x86, a
// level this CPU or build lacks) sets no cap and leaves isa_cap_env_error(),
// naming the valid levels or what the CPU has: the qkv executable exits with
// it (code 2) and qkv_model_load fails with it, since running uncapped kernels
// under a cap the user asked for would measure the wrong thing. A library
// never ends its host program.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace qkv {

// Levels in increasing order per architecture. avx2-vnni is AVX2 with
// AVX-VNNI (256-bit {vex} vpdpbusd, client CPUs without AVX-512);
// avx512-vnni is AVX-512 with VNNI and, where present, AVX512_BF16 (Highway's
// AVX3_DL); amx adds the AMX tiles.
enum class IsaLevel { kScalar, kSse4, kAvx2, kAvx2Vnni, kAvx512, kAvx512Vnni, kAmx, kNeon, kSve, kSve2 };

// "scalar", "sse4", "avx2", "avx2-vnni", "avx512", "avx512-vnni", "amx", "neon", "sve", "sve2".
const char* isa_level_name(IsaLevel level);
// The level named (case-insensitive); throws qkv::Error naming the valid levels.
IsaLevel parse_isa_level(std::string_view name);
// Every level's name, comma separated.
std::string isa_level_names();
// Whether this CPU and build can run the level; if not, *why says what it has.
bool host_has_isa_level(IsaLevel level, std::string* why = nullptr);
// The levels this CPU and build can run, lowest first, space separated.
std::string host_isa_levels();

// The cap in force, if any, and what set it ("QKV_ISA" or "--isa").
std::optional<IsaLevel> isa_cap();
const char* isa_cap_source();
// "QKV_ISA=VALUE: why it cannot be honoured", or "" when QKV_ISA is unset or in force.
const std::string& isa_cap_env_error();
// Caps the kernels at `level` (source: what set it, for messages). Throws
// qkv::Error if the host lacks the level, if a kernel has already read the
// CPU features, or if QKV_ISA set another level.
void set_isa_cap(IsaLevel level, const char* source);

// The ISA oneDNN's kernels use here ("avx2", "avx512_core_bf16", ...). Fixes
// oneDNN's ISA: call it after any set_isa_cap.
const char* onednn_cpu_isa_name();

// The Highway targets this CPU supports under the cap. Use it rather than
// hwy::SupportedTargets(), which in Highway 1.0.3 re-chooses the dispatch
// target from all the CPU's targets, the disabled ones included, until the
// next DisableTargets.
int64_t supported_simd_targets();

// The Highway targets a cap at `level` disables (every target above it).
int64_t isa_cap_disabled_targets(IsaLevel level);

}  // namespace qkv
