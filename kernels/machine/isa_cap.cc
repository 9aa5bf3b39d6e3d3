#include "kernels/machine/isa_cap.h"

// QKV_HAVE_ONEDNN (CMake's QKV_ONEDNN): a cross build finds the host's
// oneDNN headers in /usr/include but links no oneDNN.
#if QKV_HAVE_ONEDNN && __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#define QKV_ISA_CAP_ONEDNN 1
#endif

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "hwy/targets.h"
#include "kernels/error.h"
#include "kernels/machine/cpu_features.h"

namespace qkv {

namespace {

// The scalar level's Highway target: whichever of SCALAR and EMU128 the build compiles.
constexpr int64_t kScalarTarget = (HWY_TARGETS & HWY_EMU128) != 0 ? HWY_EMU128 : HWY_SCALAR;

// Per level: its name; the Highway target the level needs on the host
// (`required`) and the best target it lets the dispatch pick (`ceiling`: every
// better target is disabled; 0 disables none); whether it is an ARM level.
struct LevelInfo {
  IsaLevel level;
  const char* name;
  int64_t required;
  int64_t ceiling;
  bool arm;
};

constexpr LevelInfo kLevels[] = {
    {IsaLevel::kScalar, "scalar", kScalarTarget, kScalarTarget, false},
    {IsaLevel::kSse4, "sse4", HWY_SSE4, HWY_SSE4, false},
    {IsaLevel::kAvx2, "avx2", HWY_AVX2, HWY_AVX2, false},
    {IsaLevel::kAvx2Vnni, "avx2-vnni", HWY_AVX2, HWY_AVX2, false},
    {IsaLevel::kAvx512, "avx512", HWY_AVX3, HWY_AVX3, false},
    // VNNI without the rest of AVX3_DL (Cascade Lake) still counts: the
    // dispatch then stays on AVX3 by itself.
    {IsaLevel::kAvx512Vnni, "avx512-vnni", HWY_AVX3, HWY_AVX3_DL, false},
    {IsaLevel::kAmx, "amx", HWY_AVX3, 0, false},
    {IsaLevel::kNeon, "neon", HWY_NEON, HWY_NEON, true},
    {IsaLevel::kSve, "sve", HWY_SVE, HWY_SVE, true},
    {IsaLevel::kSve2, "sve2", HWY_SVE2, HWY_SVE2, true},
};

#ifdef QKV_ISA_CAP_ONEDNN
// The oneDNN ISA an x86 level caps oneDNN at (it has nothing below SSE4.1).
dnnl_cpu_isa_t onednn_isa(IsaLevel level) {
  switch (level) {
    case IsaLevel::kAvx2: return dnnl_cpu_isa_avx2;
    case IsaLevel::kAvx2Vnni: return dnnl_cpu_isa_avx2_vnni;
    case IsaLevel::kAvx512: return dnnl_cpu_isa_avx512_core;
    case IsaLevel::kAvx512Vnni: return dnnl_cpu_isa_avx512_core_bf16;
    case IsaLevel::kAmx: return dnnl_cpu_isa_avx512_core_amx;
    default: return dnnl_cpu_isa_sse41;
  }
}
#endif

const LevelInfo& info(IsaLevel level) { return kLevels[static_cast<int>(level)]; }

// The targets this CPU supports, read before any cap disables one (the first
// call comes before apply: host_has_isa_level).
int64_t host_targets() {
  static const int64_t targets = hwy::SupportedTargets();
  return targets;
}

// Whether the host has the level's feature beyond its Highway target.
bool has_extra_features(IsaLevel level, std::string* missing) {
  const CpuFeatures& f = host_cpu_features();
  const char* lacks = nullptr;
  if (level == IsaLevel::kAvx2Vnni && !f.avx_vnni) lacks = "AVX-VNNI";
  if (level == IsaLevel::kAvx512Vnni && !f.avx512_vnni) lacks = "AVX-512 VNNI";
  if (level == IsaLevel::kAmx && !(f.amx_bf16 && f.amx_int8)) lacks = "AMX-BF16 and AMX-INT8 (with the OS's tile state)";
  if (lacks != nullptr && missing != nullptr) *missing = lacks;
  return lacks == nullptr;
}

struct CapState {
  std::optional<IsaLevel> level;
  const char* source = nullptr;
  std::string env_error;  // why QKV_ISA could not be honoured
};

void apply(IsaLevel level) {
  hwy::DisableTargets(isa_cap_disabled_targets(level));
#ifdef QKV_ISA_CAP_ONEDNN
  // Before oneDNN's first primitive, or it refuses.
  if (!info(level).arm && dnnl_set_max_cpu_isa(onednn_isa(level)) != dnnl_success) {
    fail("oneDNN's ISA is fixed already (a oneDNN primitive ran before the cap at ", isa_level_name(level), ")");
  }
#endif
}

// QKV_ISA, read and applied once (at static initialization, through
// kEnvCapRead below, or at the first isa_cap() if that comes earlier).
CapState& state() {
  static CapState s = [] {
    CapState st;
    const char* env = std::getenv("QKV_ISA");
    if (env == nullptr || *env == '\0') return st;
    try {
      const IsaLevel level = parse_isa_level(env);
      std::string why;
      if (!host_has_isa_level(level, &why)) fail(why);
      apply(level);
      st.level = level;
      st.source = "QKV_ISA";
    } catch (const Error& e) {
      st.env_error = std::string("QKV_ISA=") + env + ": " + e.what();
    }
    return st;
  }();
  return s;
}

const bool kEnvCapRead = (state(), true);

}  // namespace

const char* isa_level_name(IsaLevel level) { return info(level).name; }

std::string isa_level_names() {
  std::string out;
  for (const LevelInfo& l : kLevels) out += (out.empty() ? "" : ", ") + std::string(l.name);
  return out;
}

IsaLevel parse_isa_level(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const LevelInfo& l : kLevels) {
    if (lower == l.name) return l.level;
  }
  fail("unknown ISA level '", std::string(name), "' (valid levels: ", isa_level_names(), ")");
}

bool host_has_isa_level(IsaLevel level, std::string* why) {
  const LevelInfo& l = info(level);
  std::string missing;
  bool ok = true;
  if (l.arm != (HWY_ARCH_ARM != 0)) {
    ok = false;
    missing = std::string(l.arm ? "an ARM level" : "an x86 level") + " on " + (HWY_ARCH_X86 ? "an x86-64" : "another") + " CPU";
  } else if ((HWY_TARGETS & l.required) == 0) {
    ok = false;
    missing = std::string("this build compiles no ") + hwy::TargetName(l.required) + " kernels";
  } else if ((host_targets() & l.required) == 0) {
    ok = false;
    missing = std::string("this CPU cannot run Highway's ") + hwy::TargetName(l.required) + " target";
  } else if (!has_extra_features(level, &missing)) {
    ok = false;
    missing = "this CPU has no " + missing;
  }
  if (!ok && why != nullptr) {
    *why = "cannot cap at " + std::string(l.name) + ": " + missing + " (levels this CPU and build can run: " +
           host_isa_levels() + ")";
  }
  return ok;
}

std::string host_isa_levels() {
  std::string out;
  for (const LevelInfo& l : kLevels) {
    if (host_has_isa_level(l.level)) out += (out.empty() ? "" : " ") + std::string(l.name);
  }
  return out.empty() ? "none" : out;
}

int64_t isa_cap_disabled_targets(IsaLevel level) {
  const int64_t ceiling = info(level).ceiling;
  // Highway's better targets have the lower bits.
  return ceiling == 0 ? 0 : ceiling - 1;
}

int64_t supported_simd_targets() {
  const std::optional<IsaLevel> cap = isa_cap();
  const int64_t targets = host_targets() & ~(cap.has_value() ? isa_cap_disabled_targets(*cap) : 0);
  return targets != 0 ? targets : HWY_STATIC_TARGET;
}

std::optional<IsaLevel> isa_cap() { return state().level; }

const char* isa_cap_source() { return state().source; }

const std::string& isa_cap_env_error() { return state().env_error; }

const char* onednn_cpu_isa_name() {
#ifdef QKV_ISA_CAP_ONEDNN
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
#else
  return "none (built without oneDNN)";
#endif
}

void set_isa_cap(IsaLevel level, const char* source) {
  CapState& st = state();
  if (st.level.has_value()) {
    QKV_CHECK(*st.level == level, source, " ", isa_level_name(level), " conflicts with ", st.source, "=",
              isa_level_name(*st.level));
    return;
  }
  std::string why;
  QKV_CHECK(host_has_isa_level(level, &why), source, ": ", why);
  QKV_CHECK(!cpu_features_read(), source, " ", isa_level_name(level),
            ": the kernels have read the CPU features already (the cap is set before the first kernel runs)");
  apply(level);
  st.level = level;
  st.source = source;
}

}  // namespace qkv
