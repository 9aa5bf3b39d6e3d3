// Included first (before any Highway header) by the kernel files whose
// Highway code cannot compile for, or does not fit, Highway's SVE targets:
// it leaves those files' SVE targets out, so on an SVE CPU their dynamic
// dispatch picks NEON while every other kernel runs its SVE code (Highway
// chooses per translation unit among the targets that unit compiled:
// ChosenTarget::GetIndex in hwy/targets.h).
//
// Why each file is excluded:
//  - kernels/attention/attention.cc (row-, group- and tile-inl.h, plan-inl.h)
//    and kernels/matmul_small/matmul_small.cc (f32-inl.h) keep register
//    blocks in arrays of vectors (VF acc[KB][RB], a transpose tree over
//    VF v[N / 2]) and SoftCap keeps vectors as members; SVE's sizeless vector
//    types are allowed in neither. Both also size their blocking by
//    hn::MaxLanes at compile time (the group kernel's lane rotations, the f32
//    tile's whole 128-bit blocks, the chunk's whole vectors of block scales),
//    which is the real width only on fixed-width targets: the scalable SVE
//    and SVE2 targets report 2048 bits.
//  - kernels/quant/activation.cc indexes arrays of vectors by run-time lane
//    counts (its per-block max and sum vectors), and asserts at compile time
//    that a vector fits in a 16-value Q8_K group (MaxLanes <= 16), which the
//    scalable targets fail.
#ifndef QKV_KERNELS_SVE_EXCLUDED_H_
#define QKV_KERNELS_SVE_EXCLUDED_H_

#ifdef HIGHWAY_HWY_DETECT_TARGETS_H_
#error "kernels/sve_excluded.h must come before every Highway header"
#endif
#if defined(__aarch64__) && !defined(HWY_DISABLED_TARGETS)
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif

#endif  // QKV_KERNELS_SVE_EXCLUDED_H_
