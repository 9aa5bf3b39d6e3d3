// ctest-labels: kernels asan
// arm_features() (kernels/machine/arm_features.h) against the CPU itself: on
// aarch64 every feature it reports must execute one of its instructions and
// every feature it denies must raise SIGILL (instructions as raw encodings,
// so the assembler's defaults do not matter), and the SVE vector length must
// be what RDVL reads. Under qemu-user both CPU models of scripts/test.sh's
// aarch64 stage (QEMU_CPU=max, QEMU_CPU=cortex-a53) take the two sides. On
// other architectures every feature is false.
#include <doctest/doctest.h>

#include <csetjmp>
#include <csignal>
#include <cstdint>

#include "kernels/machine/arm_features.h"

using namespace qkv;

#if defined(__aarch64__)
namespace {

sigjmp_buf g_jump;

void on_sigill(int) { siglongjmp(g_jump, 1); }

// Whether fn runs without SIGILL.
template <typename Fn>
bool executes(Fn fn) {
  struct sigaction sa = {}, old = {};
  sa.sa_handler = on_sigill;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGILL, &sa, &old);
  bool ok = false;
  if (sigsetjmp(g_jump, 1) == 0) {
    fn();
    ok = true;
  }
  sigaction(SIGILL, &old, nullptr);
  return ok;
}

// Encodings from aarch64-linux-gnu-as -march=armv8.6-a+sve+i8mm+bf16+dotprod.
void sdot() { asm volatile(".inst 0x4e829420" ::: "v0"); }   // sdot v0.4s, v1.16b, v2.16b
void smmla() { asm volatile(".inst 0x4e82a420" ::: "v0"); }  // smmla v0.4s, v1.16b, v2.16b
void bfdot() { asm volatile(".inst 0x6e42fc20" ::: "v0"); }  // bfdot v0.4s, v1.8h, v2.8h
uint64_t rdvl() {                                            // rdvl x0, #1: the vector length in bytes
  uint64_t bytes = 0;
  asm volatile(".inst 0x04bf5020\n\tmov %0, x0" : "=r"(bytes) : : "x0");
  return bytes;
}

}  // namespace

TEST_CASE("each reported ARM feature executes and each denied one traps") {
  const ArmFeatures& f = arm_features();
  MESSAGE(describe_arm_features(f));
  CHECK(f.neon);  // every aarch64 Linux CPU
  CHECK(executes(sdot) == f.dotprod);
  CHECK(executes(smmla) == f.i8mm);
  CHECK(executes(bfdot) == f.bf16);
  uint64_t vl = 0;
  CHECK(executes([&] { vl = rdvl(); }) == f.sve);
  if (f.sve) {
    CHECK(static_cast<uint64_t>(f.sve_vector_bytes) == vl);
    CHECK(f.sve_vector_bytes >= 16);
    CHECK(f.sve_vector_bytes <= 256);
    CHECK(f.sve_vector_bytes % 16 == 0);
  } else {
    CHECK(f.sve_vector_bytes == 0);
    CHECK_FALSE(f.sve2);
  }
}
#else
TEST_CASE("no ARM features off aarch64") {
  const ArmFeatures& f = arm_features();
  CHECK_FALSE(f.neon);
  CHECK_FALSE(f.dotprod);
  CHECK_FALSE(f.i8mm);
  CHECK_FALSE(f.bf16);
  CHECK_FALSE(f.sve);
  CHECK_FALSE(f.sme);
  CHECK(f.sve_vector_bytes == 0);
  CHECK(describe_arm_features(f) ==
        "NEON no, FP16 no, dot product no, i8mm no, BF16 no, SVE no, SVE2 no, SME no");
}
#endif

TEST_CASE("the description names the SVE vector length in bits") {
  ArmFeatures f;
  f.neon = f.dotprod = f.sve = true;
  f.sve_vector_bytes = 32;
  CHECK(describe_arm_features(f) ==
        "NEON yes, FP16 no, dot product yes, i8mm no, BF16 no, SVE yes (256-bit vectors), SVE2 no, SME no");
}
