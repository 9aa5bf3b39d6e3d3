// ctest-labels: asan
// The ISA cap (kernels/machine/isa_cap.h): level names, the Highway targets a
// cap disables, the host check, and, when the process runs under QKV_ISA
// (tests/isa_caps.cmake registers this suite once per cap the host allows),
// that the dispatch, cpu_features() and oneDNN obey it.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "hwy/targets.h"
#include "kernels/error.h"
#include "kernels/machine/cpu_features.h"
#include "kernels/machine/isa_cap.h"
#include "kernels/simd_target.h"
#include "qkv.h"

using namespace qkv;

namespace {

constexpr IsaLevel kAllLevels[] = {IsaLevel::kScalar,     IsaLevel::kSse4, IsaLevel::kAvx2, IsaLevel::kAvx2Vnni,
                                   IsaLevel::kAvx512,     IsaLevel::kAvx512Vnni, IsaLevel::kAmx, IsaLevel::kNeon,
                                   IsaLevel::kSve,        IsaLevel::kSve2};

// The Highway target whose name simd_target_name() gives.
int64_t target_named(const std::string& name) {
  for (int bit = 0; bit < 63; ++bit) {
    const int64_t t = int64_t{1} << bit;
    if (name == hwy::TargetName(t)) return t;
  }
  return 0;
}

}  // namespace

TEST_CASE("ISA levels: names round-trip, bad names are refused naming the valid ones") {
  for (IsaLevel level : kAllLevels) {
    CAPTURE(isa_level_name(level));
    CHECK(parse_isa_level(isa_level_name(level)) == level);
  }
  CHECK(parse_isa_level("AVX2") == IsaLevel::kAvx2);
  CHECK(parse_isa_level("Avx512-VNNI") == IsaLevel::kAvx512Vnni);
  for (const char* bad : {"", "avx", "avx-512", "avx2 ", "x86", "avx512vnni"}) {
    CAPTURE(bad);
    try {
      parse_isa_level(bad);
      FAIL("accepted");
    } catch (const Error& e) {
      const std::string what = e.what();
      CHECK(what.find("unknown ISA level") != std::string::npos);
      CHECK(what.find("avx2, avx2-vnni, avx512, avx512-vnni, amx, neon, sve, sve2") != std::string::npos);
    }
  }
}

TEST_CASE("ISA levels: each cap disables exactly the Highway targets above it") {
  CHECK(isa_cap_disabled_targets(IsaLevel::kAvx2) == (HWY_AVX2 - 1));
  CHECK((isa_cap_disabled_targets(IsaLevel::kAvx2) & HWY_AVX3) != 0);
  CHECK((isa_cap_disabled_targets(IsaLevel::kAvx2) & HWY_AVX3_DL) != 0);
  CHECK((isa_cap_disabled_targets(IsaLevel::kAvx2) & (HWY_AVX2 | HWY_SSE4)) == 0);
  CHECK(isa_cap_disabled_targets(IsaLevel::kAvx2Vnni) == isa_cap_disabled_targets(IsaLevel::kAvx2));
  CHECK((isa_cap_disabled_targets(IsaLevel::kAvx512) & HWY_AVX3_DL) != 0);
  CHECK((isa_cap_disabled_targets(IsaLevel::kAvx512) & (HWY_AVX3 | HWY_AVX2)) == 0);
  CHECK((isa_cap_disabled_targets(IsaLevel::kAvx512Vnni) & (HWY_AVX3_DL | HWY_AVX3)) == 0);
  CHECK(isa_cap_disabled_targets(IsaLevel::kAmx) == 0);
  CHECK((isa_cap_disabled_targets(IsaLevel::kSse4) & (HWY_AVX2 | HWY_AVX3 | HWY_AVX3_DL)) ==
        (HWY_AVX2 | HWY_AVX3 | HWY_AVX3_DL));
  CHECK((isa_cap_disabled_targets(IsaLevel::kSse4) & HWY_SSE4) == 0);
  CHECK((isa_cap_disabled_targets(IsaLevel::kNeon) & (HWY_SVE | HWY_SVE2)) == (HWY_SVE | HWY_SVE2));
  CHECK((isa_cap_disabled_targets(IsaLevel::kNeon) & HWY_NEON) == 0);
  CHECK((isa_cap_disabled_targets(IsaLevel::kScalar) & (HWY_SSE4 | HWY_NEON)) == (HWY_SSE4 | HWY_NEON));
}

TEST_CASE("ISA levels: the host check follows the CPU's features and architecture") {
  const CpuFeatures& h = host_cpu_features();
  const std::string levels = host_isa_levels();
  CAPTURE(levels);
#if HWY_ARCH_X86
  for (IsaLevel arm : {IsaLevel::kNeon, IsaLevel::kSve, IsaLevel::kSve2}) {
    std::string why;
    CHECK_FALSE(host_has_isa_level(arm, &why));
    CHECK(why.find("an ARM level on an x86-64 CPU") != std::string::npos);
    CHECK(why.find(levels) != std::string::npos);
  }
  // A build that compiles the AVX2 target runs it wherever the CPU has AVX2.
  if ((HWY_TARGETS & HWY_AVX2) != 0) CHECK(host_has_isa_level(IsaLevel::kAvx2) == h.avx2);
  if ((HWY_TARGETS & HWY_AVX2) != 0) CHECK(host_has_isa_level(IsaLevel::kAvx2Vnni) == h.avx_vnni);
  if ((HWY_TARGETS & HWY_AVX3) != 0) CHECK(host_has_isa_level(IsaLevel::kAvx512) == h.avx512);
  if ((HWY_TARGETS & HWY_AVX3) != 0) CHECK(host_has_isa_level(IsaLevel::kAvx512Vnni) == h.avx512_vnni);
  if (!h.amx_bf16) {
    std::string why;
    CHECK_FALSE(host_has_isa_level(IsaLevel::kAmx, &why));
    // Where this build and CPU run the AVX-512 target AMX builds on, what is
    // missing is AMX itself; otherwise (e.g. the sanitizer builds, which
    // compile SSE4 only) the target is.
    CHECK(why.find(host_has_isa_level(IsaLevel::kAvx512) ? "this CPU has no AMX" : "cannot cap at amx: this") !=
          std::string::npos);
  }
#endif
  if ((HWY_TARGETS & (HWY_SCALAR | HWY_EMU128)) == 0) {
    std::string why;
    CHECK_FALSE(host_has_isa_level(IsaLevel::kScalar, &why));
    CHECK(why.find("this build compiles no") != std::string::npos);
  }
  for (IsaLevel level : kAllLevels) {
    const bool listed = (" " + levels + " ").find(std::string(" ") + isa_level_name(level) + " ") != std::string::npos;
    CAPTURE(isa_level_name(level));
    CHECK(host_has_isa_level(level) == listed);
  }
}

TEST_CASE("the cap in force: dispatch, CPU features and oneDNN obey it") {
  const char* env = std::getenv("QKV_ISA");
  const auto cap = isa_cap();
  if (env == nullptr || *env == '\0') {
    CHECK_FALSE(cap.has_value());
    MESSAGE("no QKV_ISA: checked that no cap is in force (tests/isa_caps.cmake runs this suite under caps)");
    return;
  }
  REQUIRE(cap.has_value());
  const IsaLevel level = *cap;
  CHECK(level == parse_isa_level(env));
  CHECK(std::string(isa_cap_source()) == "QKV_ISA");

  // The dispatch picks the best target the cap allows, never one above it.
  const int64_t chosen = target_named(simd_target_name());
  CAPTURE(simd_target_name());
  REQUIRE(chosen != 0);
  CHECK((chosen & isa_cap_disabled_targets(level)) == 0);
  CHECK((supported_simd_targets() & isa_cap_disabled_targets(level)) == 0);
  CHECK(chosen == (supported_simd_targets() & HWY_TARGETS & -(supported_simd_targets() & HWY_TARGETS)));
  if (level == IsaLevel::kAvx2 || level == IsaLevel::kAvx2Vnni) CHECK(chosen == HWY_AVX2);
  if (level == IsaLevel::kAvx512) CHECK(chosen == HWY_AVX3);
  if (level == IsaLevel::kSse4) CHECK(chosen == HWY_SSE4);

  const CpuFeatures& f = cpu_features();
  const CpuFeatures& h = host_cpu_features();
  CHECK(f.intel == h.intel);
  CHECK(f.amd == h.amd);
  const bool avx512_allowed = level >= IsaLevel::kAvx512 && level <= IsaLevel::kAmx;
  CHECK(f.avx512 == (h.avx512 && avx512_allowed));
  CHECK(f.avx512_vnni == (h.avx512_vnni && avx512_allowed && level != IsaLevel::kAvx512));
  CHECK(f.avx512_bf16 == (h.avx512_bf16 && avx512_allowed && level != IsaLevel::kAvx512));
  CHECK(f.amx_bf16 == (h.amx_bf16 && level == IsaLevel::kAmx));
  CHECK(f.amx_int8 == (h.amx_int8 && level == IsaLevel::kAmx));
  CHECK(f.avx_vnni == (h.avx_vnni && level >= IsaLevel::kAvx2Vnni && level <= IsaLevel::kAmx));

  // The cap cannot change once set, nor move to another level.
  for (IsaLevel other : kAllLevels) {
    if (other == level) continue;
    CAPTURE(isa_level_name(other));
    CHECK_THROWS_AS(set_isa_cap(other, "--isa"), Error);
  }
  CHECK_NOTHROW(set_isa_cap(level, "--isa"));  // the same level again: nothing to do

  const std::string onednn = onednn_cpu_isa_name();
  CAPTURE(onednn);
  if (level == IsaLevel::kAvx2) CHECK(onednn == "avx2");
  if (level == IsaLevel::kAvx512) CHECK(onednn == "avx512_core");
}

TEST_CASE("set_isa_cap refuses once the kernels have read the CPU features") {
  if (isa_cap().has_value()) return;  // the case above covers a cap set by QKV_ISA
  (void)cpu_features();
  CHECK(cpu_features_read());
  for (IsaLevel level : kAllLevels) {
    CAPTURE(isa_level_name(level));
    try {
      set_isa_cap(level, "--isa");
      FAIL("accepted after the features were read");
    } catch (const Error& e) {
      const std::string what = e.what();
      // Levels the host has: too late; the others: not on this CPU.
      if (host_has_isa_level(level)) {
        CHECK(what.find("the kernels have read the CPU features already") != std::string::npos);
      } else {
        CHECK(what.find("cannot cap at") != std::string::npos);
      }
    }
  }
  CHECK_FALSE(isa_cap().has_value());
}

// QKV_ISA is read before main, so the check runs this suite again as a child
// with a QKV_ISA no CPU has: there qkv_model_load refuses with the reason
// (the library never ends its host program; the qkv executable exits 2).
TEST_CASE("a QKV_ISA that cannot be honoured fails qkv_model_load with the reason") {
  const char* env = std::getenv("QKV_ISA");
  if (env != nullptr && std::string(env) == "no-such-level") {
    CHECK(isa_cap_env_error().find("QKV_ISA=no-such-level: unknown ISA level 'no-such-level'") == 0);
    CHECK_FALSE(isa_cap().has_value());
    qkv_model* model = nullptr;
    CHECK(qkv_model_load("tests/test_isa_cap.cc", nullptr, &model) != QKV_OK);  // a readable file
    CHECK(model == nullptr);
    CHECK(std::string(qkv_last_error()).find("QKV_ISA=no-such-level: unknown ISA level") != std::string::npos);
    return;
  }
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string child = "QKV_ISA=no-such-level '" + self +
                            "' --test-case='a QKV_ISA that cannot be honoured*' > /dev/null 2>&1";
  CHECK(std::system(child.c_str()) == 0);
}
