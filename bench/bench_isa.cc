// Instruction rates of this CPU, the ceilings the kernels are read against:
// register-only loops of 12 independent vpdpbusd (int8, 64 multiply-adds),
// vdpbf16ps (bf16 pairs, 32) and vfmadd231ps (f32, 16), and the packed int8
// GEMM's k-step (kernels/quant/gemm_vnni_packed-inl.h: two line loads and six
// activation broadcasts feeding 12 vpdpbusd) with the broadcast done by
// vpbroadcastd or by vbroadcastss from memory, or folded into vpdpbusd as an
// embedded broadcast ({1to16}); and the inputs-in-lanes step (16 input
// chains, one vbroadcastss per vpdpbusd against lines held in registers);
// and 12 vpdpbusd with 4 of another operation (BM_vpdpbusd_with: which
// operations take vpdpbusd's ports).
// Counters: instructions per second (G/s) and multiply-adds as operations
// per second (OP/s, 2 each).
// Rows whose instructions the CPU lacks are skipped with a message.
//   build/bench/bench_isa --benchmark_repetitions=3
#include <benchmark/benchmark.h>
#include <cpuid.h>

#include <cstdint>
#include <string>

namespace {

bool has_leaf7(int reg, int bit, int subleaf = 0) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, static_cast<unsigned>(subleaf), &a, &b, &c, &d)) return false;
  const unsigned v = reg == 1 ? b : reg == 2 ? c : d;
  return (v >> bit) & 1u;
}
// CPUID leaf 7: AVX512F EBX 16, AVX512_VNNI ECX 11; subleaf 1: AVX512_BF16 EAX 5.
bool has_avx512f() { return has_leaf7(1, 16); }
bool has_vnni() { return has_avx512f() && has_leaf7(2, 11); }
bool has_bf16() {
  unsigned a, b, c, d;
  return has_avx512f() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 5) & 1u);
}

#define QKV_TWELVE(op)                                                                                           \
  op " %%zmm12, %%zmm13, %%zmm0\n\t" op " %%zmm12, %%zmm13, %%zmm1\n\t" op " %%zmm12, %%zmm13, %%zmm2\n\t" op \
     " %%zmm12, %%zmm13, %%zmm3\n\t" op " %%zmm12, %%zmm13, %%zmm4\n\t" op " %%zmm12, %%zmm13, %%zmm5\n\t" op   \
     " %%zmm12, %%zmm13, %%zmm6\n\t" op " %%zmm12, %%zmm13, %%zmm7\n\t" op " %%zmm12, %%zmm13, %%zmm8\n\t" op   \
     " %%zmm12, %%zmm13, %%zmm9\n\t" op " %%zmm12, %%zmm13, %%zmm10\n\t" op " %%zmm12, %%zmm13, %%zmm11\n\t"
#define QKV_CLOBBER_0_11 "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11"

constexpr int64_t kLoops = 1 << 20;

// Accumulators zmm0-11 zero, operands zmm12-13 0x3F803F80 in every lane (bf16
// pairs of 1.0; as f32 about 1.004): normal numbers throughout, since a
// denormal operand sends f32 FMAs through a microcode assist (with whatever
// the registers held, this loop ran at 0.23 G/s).
#define QKV_INIT_REGS                                                                                              __asm__ volatile(                                                                                                    "vpxord %%zmm0, %%zmm0, %%zmm0\n\t vmovdqa64 %%zmm0, %%zmm1\n\t vmovdqa64 %%zmm0, %%zmm2\n\t"                     "vmovdqa64 %%zmm0, %%zmm3\n\t vmovdqa64 %%zmm0, %%zmm4\n\t vmovdqa64 %%zmm0, %%zmm5\n\t"                          "vmovdqa64 %%zmm0, %%zmm6\n\t vmovdqa64 %%zmm0, %%zmm7\n\t vmovdqa64 %%zmm0, %%zmm8\n\t"                          "vmovdqa64 %%zmm0, %%zmm9\n\t vmovdqa64 %%zmm0, %%zmm10\n\t vmovdqa64 %%zmm0, %%zmm11\n\t"                        "vpbroadcastd %0, %%zmm12\n\t vmovdqa64 %%zmm12, %%zmm13\n\t" ::"r"(0x3F803F80)                               : QKV_CLOBBER_0_11, "xmm12", "xmm13")

void report(benchmark::State& state, double macs_per_instruction, double per_loop = 12) {
  const double n = per_loop * kLoops * static_cast<double>(state.iterations());
  state.counters["G/s"] = benchmark::Counter(n / 1e9, benchmark::Counter::kIsRate);
  state.counters["OP/s"] = benchmark::Counter(2 * macs_per_instruction * n, benchmark::Counter::kIsRate,
                                              benchmark::Counter::kIs1000);
}

__attribute__((target("avx512f,avx512vnni"))) void BM_vpdpbusd(benchmark::State& state) {
  if (!has_vnni()) return state.SkipWithError("no AVX512_VNNI on this CPU");
  for (auto _ : state) {
    QKV_INIT_REGS;
    for (int64_t i = 0; i < kLoops; ++i) __asm__ volatile(QKV_TWELVE("vpdpbusd") ::: QKV_CLOBBER_0_11);
  }
  report(state, 64);
}

__attribute__((target("avx512f,avx512bf16"))) void BM_vdpbf16ps(benchmark::State& state) {
  if (!has_bf16()) return state.SkipWithError("no AVX512_BF16 on this CPU");
  for (auto _ : state) {
    QKV_INIT_REGS;
    for (int64_t i = 0; i < kLoops; ++i) __asm__ volatile(QKV_TWELVE("vdpbf16ps") ::: QKV_CLOBBER_0_11);
  }
  report(state, 32);
}

__attribute__((target("avx512f"))) void BM_vfmadd231ps(benchmark::State& state) {
  if (!has_avx512f()) return state.SkipWithError("no AVX-512 on this CPU");
  for (auto _ : state) {
    QKV_INIT_REGS;
    for (int64_t i = 0; i < kLoops; ++i) __asm__ volatile(QKV_TWELVE("vfmadd231ps") ::: QKV_CLOBBER_0_11);
  }
  report(state, 16);
}

// The packed GEMM's k-step: 2 lines x 6 inputs; `broadcast` is vpbroadcastd
// or vbroadcastss (both from memory, at the kernel's odd activation offsets).
#define QKV_KSTEP(bcast)                                                                                     \
  "vmovdqa32 0(%0), %%zmm12\n\t vmovdqa32 64(%0), %%zmm13\n\t" bcast                                        \
  " 130(%0), %%zmm14\n\t vpdpbusd %%zmm14, %%zmm12, %%zmm0\n\t vpdpbusd %%zmm14, %%zmm13, %%zmm1\n\t" bcast  \
  " 164(%0), %%zmm15\n\t vpdpbusd %%zmm15, %%zmm12, %%zmm2\n\t vpdpbusd %%zmm15, %%zmm13, %%zmm3\n\t" bcast  \
  " 198(%0), %%zmm16\n\t vpdpbusd %%zmm16, %%zmm12, %%zmm4\n\t vpdpbusd %%zmm16, %%zmm13, %%zmm5\n\t" bcast  \
  " 232(%0), %%zmm17\n\t vpdpbusd %%zmm17, %%zmm12, %%zmm6\n\t vpdpbusd %%zmm17, %%zmm13, %%zmm7\n\t" bcast  \
  " 266(%0), %%zmm18\n\t vpdpbusd %%zmm18, %%zmm12, %%zmm8\n\t vpdpbusd %%zmm18, %%zmm13, %%zmm9\n\t" bcast  \
  " 300(%0), %%zmm19\n\t vpdpbusd %%zmm19, %%zmm12, %%zmm10\n\t vpdpbusd %%zmm19, %%zmm13, %%zmm11\n\t"
#define QKV_CLOBBER_KSTEP QKV_CLOBBER_0_11, "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19"

alignas(64) unsigned char g_buf[512];

__attribute__((target("avx512f,avx512vnni"))) void BM_kstep(benchmark::State& state, bool vbroadcastss) {
  if (!has_vnni()) return state.SkipWithError("no AVX512_VNNI on this CPU");
  const unsigned char* p = g_buf;
  for (auto _ : state) {
    QKV_INIT_REGS;
    if (vbroadcastss) {
      for (int64_t i = 0; i < kLoops; ++i) __asm__ volatile(QKV_KSTEP("vbroadcastss") ::"r"(p) : QKV_CLOBBER_KSTEP);
    } else {
      for (int64_t i = 0; i < kLoops; ++i) __asm__ volatile(QKV_KSTEP("vpbroadcastd") ::"r"(p) : QKV_CLOBBER_KSTEP);
    }
  }
  report(state, 64);
}

// The k-step with the activation broadcast folded into each vpdpbusd.
#define QKV_EMB(off, a, b) \
  "vpdpbusd " off "(%0)%{1to16%}, %%zmm12, %%zmm" a "\n\t vpdpbusd " off "(%0)%{1to16%}, %%zmm13, %%zmm" b "\n\t"
#define QKV_KSTEP_EMB                                                                                         \
  "vmovdqa32 0(%0), %%zmm12\n\t vmovdqa32 64(%0), %%zmm13\n\t" QKV_EMB("130", "0", "1") QKV_EMB("164", "2", "3") \
      QKV_EMB("198", "4", "5") QKV_EMB("232", "6", "7") QKV_EMB("266", "8", "9") QKV_EMB("300", "10", "11")

__attribute__((target("avx512f,avx512vnni"))) void BM_kstep_embedded(benchmark::State& state) {
  if (!has_vnni()) return state.SkipWithError("no AVX512_VNNI on this CPU");
  const unsigned char* p = g_buf;
  for (auto _ : state) {
    QKV_INIT_REGS;
    for (int64_t i = 0; i < kLoops; ++i) __asm__ volatile(QKV_KSTEP_EMB ::"r"(p) : QKV_CLOBBER_KSTEP);
  }
  report(state, 64);
}

// Inputs in lanes: 16 input chains (accumulators zmm0-11 and zmm20-23), two
// lines held in zmm24 and zmm25, one vbroadcastss per vpdpbusd (32 a loop).
#define QKV_LANE(off, reg, line, acc) \
  "vbroadcastss " off "(%0), %%zmm" reg "\n\t vpdpbusd %%zmm" reg ", %%zmm" line ", %%zmm" acc "\n\t"
#define QKV_KSTEP_LANES \
  QKV_LANE("0", "14", "24", "0") QKV_LANE("4", "15", "24", "1") QKV_LANE("8", "16", "24", "2") QKV_LANE("12", "17", "24", "3") \
  QKV_LANE("16", "18", "24", "4") QKV_LANE("20", "19", "24", "5") QKV_LANE("24", "14", "24", "6") QKV_LANE("28", "15", "24", "7") \
  QKV_LANE("32", "16", "24", "8") QKV_LANE("36", "17", "24", "9") QKV_LANE("40", "18", "24", "10") QKV_LANE("44", "19", "24", "11") \
  QKV_LANE("48", "14", "24", "20") QKV_LANE("52", "15", "24", "21") QKV_LANE("56", "16", "24", "22") QKV_LANE("60", "17", "24", "23") \
  QKV_LANE("64", "14", "25", "0") QKV_LANE("68", "15", "25", "1") QKV_LANE("72", "16", "25", "2") QKV_LANE("76", "17", "25", "3") \
  QKV_LANE("80", "18", "25", "4") QKV_LANE("84", "19", "25", "5") QKV_LANE("88", "14", "25", "6") QKV_LANE("92", "15", "25", "7") \
  QKV_LANE("96", "16", "25", "8") QKV_LANE("100", "17", "25", "9") QKV_LANE("104", "18", "25", "10") QKV_LANE("108", "19", "25", "11") \
  QKV_LANE("112", "14", "25", "20") QKV_LANE("116", "15", "25", "21") QKV_LANE("120", "16", "25", "22") QKV_LANE("124", "17", "25", "23")

__attribute__((target("avx512f,avx512vnni"))) void BM_kstep_lanes(benchmark::State& state) {
  if (!has_vnni()) return state.SkipWithError("no AVX512_VNNI on this CPU");
  const unsigned char* p = g_buf;
  for (auto _ : state) {
    QKV_INIT_REGS;
    __asm__ volatile(
        "vmovdqa64 %%zmm0, %%zmm20\n\t vmovdqa64 %%zmm0, %%zmm21\n\t vmovdqa64 %%zmm0, %%zmm22\n\t"
        "vmovdqa64 %%zmm0, %%zmm23\n\t vmovdqa64 %%zmm12, %%zmm24\n\t vmovdqa64 %%zmm12, %%zmm25" ::
            : "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25");
    for (int64_t i = 0; i < kLoops; ++i) {
      __asm__ volatile(QKV_KSTEP_LANES ::"r"(p) : QKV_CLOBBER_KSTEP, "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25");
    }
  }
  report(state, 64, 32);
}

// 12 vpdpbusd with 4 other operations between them (one after every third,
// writing zmm20-23 from the same operands): whether an operation of the
// packed tile's epilogue (convert, multiply, fused multiply-add per 8
// vpdpbusd), its packing (and, shift) or the attention's score tree
// (shuffles, f16 conversions) issues beside vpdpbusd or takes its ports.
// G/s counts the vpdpbusd: 12 a loop at the port's peak means the other
// operation ran elsewhere.
#define QKV_DP3(a, b, c)                                                                                     \
  "vpdpbusd %%zmm12, %%zmm13, %%zmm" a "\n\t vpdpbusd %%zmm12, %%zmm13, %%zmm" b "\n\t vpdpbusd %%zmm12, " \
  "%%zmm13, %%zmm" c "\n\t"
#define QKV_MIX(op) \
  QKV_DP3("0", "1", "2") op("20") QKV_DP3("3", "4", "5") op("21") QKV_DP3("6", "7", "8") op("22") QKV_DP3("9", "10", "11") op("23")
#define QKV_OP_CVT(d) "vcvtdq2ps %%zmm12, %%zmm" d "\n\t"
#define QKV_OP_MUL(d) "vmulps %%zmm12, %%zmm13, %%zmm" d "\n\t"
#define QKV_OP_FMA(d) "vfmadd231ps %%zmm12, %%zmm13, %%zmm" d "\n\t"
#define QKV_OP_ADD(d) "vaddps %%zmm12, %%zmm13, %%zmm" d "\n\t"
#define QKV_OP_ADDD(d) "vpaddd %%zmm12, %%zmm13, %%zmm" d "\n\t"
#define QKV_OP_MULLD(d) "vpmulld %%zmm12, %%zmm13, %%zmm" d "\n\t"
#define QKV_OP_AND(d) "vpandd %%zmm12, %%zmm13, %%zmm" d "\n\t"
#define QKV_OP_SRL(d) "vpsrlw $4, %%zmm12, %%zmm" d "\n\t"
#define QKV_OP_SHUF(d) "vshufps $0x88, %%zmm12, %%zmm13, %%zmm" d "\n\t"
#define QKV_OP_SHUF128(d) "vshuff32x4 $0x88, %%zmm12, %%zmm13, %%zmm" d "\n\t"
#define QKV_OP_CVTPH(d) "vcvtph2ps %%ymm12, %%zmm" d "\n\t"
#define QKV_OP_BITSHUF(d) "vpshufbitqmb %%zmm12, %%zmm13, %%k1\n\t"
#define QKV_CLOBBER_MIX QKV_CLOBBER_0_11, "xmm20", "xmm21", "xmm22", "xmm23"

// One loop of each mix; "k1" clobbered for vpshufbitqmb, which writes it.
#define QKV_MIX_LOOP(fn, op)                                                                   \
  __attribute__((target("avx512f,avx512vnni,avx512bitalg"))) void fn() {                       \
    for (int64_t i = 0; i < kLoops; ++i) __asm__ volatile(QKV_MIX(op) ::: QKV_CLOBBER_MIX, "k1"); \
  }
QKV_MIX_LOOP(MixCvt, QKV_OP_CVT)
QKV_MIX_LOOP(MixMul, QKV_OP_MUL)
QKV_MIX_LOOP(MixFma, QKV_OP_FMA)
QKV_MIX_LOOP(MixAdd, QKV_OP_ADD)
QKV_MIX_LOOP(MixAddD, QKV_OP_ADDD)
QKV_MIX_LOOP(MixMulLD, QKV_OP_MULLD)
QKV_MIX_LOOP(MixAnd, QKV_OP_AND)
QKV_MIX_LOOP(MixSrl, QKV_OP_SRL)
QKV_MIX_LOOP(MixShuf, QKV_OP_SHUF)
QKV_MIX_LOOP(MixShuf128, QKV_OP_SHUF128)
QKV_MIX_LOOP(MixCvtPh, QKV_OP_CVTPH)
QKV_MIX_LOOP(MixBitShuf, QKV_OP_BITSHUF)
#undef QKV_MIX_LOOP

// bitalg: the loop needs AVX512_BITALG (vpshufbitqmb) as well.
__attribute__((target("avx512f,avx512vnni"))) void BM_vpdpbusd_with(benchmark::State& state, void (*loop)(),
                                                                     bool bitalg) {
  if (!has_vnni()) return state.SkipWithError("no AVX512_VNNI on this CPU");
  if (bitalg && !has_leaf7(2, 12)) return state.SkipWithError("no AVX512_BITALG on this CPU");
  for (auto _ : state) {
    QKV_INIT_REGS;
    __asm__ volatile("vpxord %%zmm20, %%zmm20, %%zmm20\n\t vmovdqa64 %%zmm20, %%zmm21\n\t"
                     "vmovdqa64 %%zmm20, %%zmm22\n\t vmovdqa64 %%zmm20, %%zmm23" ::
                         : "xmm20", "xmm21", "xmm22", "xmm23");
    loop();
  }
  report(state, 64);
}

BENCHMARK(BM_vpdpbusd);
BENCHMARK(BM_vdpbf16ps);
BENCHMARK(BM_vfmadd231ps);
BENCHMARK_CAPTURE(BM_kstep, vpbroadcastd, false);
BENCHMARK_CAPTURE(BM_kstep, vbroadcastss, true);
BENCHMARK(BM_kstep_embedded);
BENCHMARK(BM_kstep_lanes);
const struct {
  const char* name;
  void (*loop)();
} kMixes[] = {{"vcvtdq2ps", MixCvt}, {"vmulps", MixMul},   {"vfmadd231ps", MixFma},   {"vaddps", MixAdd},
              {"vpaddd", MixAddD},   {"vpmulld", MixMulLD}, {"vpandd", MixAnd},       {"vpsrlw", MixSrl},
              {"vshufps", MixShuf},  {"vshuff32x4", MixShuf128}, {"vcvtph2ps", MixCvtPh}, {"vpshufbitqmb", MixBitShuf}};
const bool g_mixes_registered = [] {
  for (const auto& m : kMixes) {
    benchmark::RegisterBenchmark((std::string("BM_vpdpbusd_with/") + m.name).c_str(), BM_vpdpbusd_with, m.loop,
                                 m.loop == MixBitShuf);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
