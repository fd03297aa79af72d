// Run-time instruction-set dispatch for ember's own CPU loops (oneDNN does its own).
//
// Two mechanisms, both chosen when the program runs, never at configure time only:
//  * EMBER_CLONES on a plain loop: GCC/Clang compile AVX-512, AVX2 and baseline copies and the
//    loader picks one (ifunc). Used for loops the compiler vectorises well on its own.
//  * VecOps: explicit AVX-512 / AVX2+F16C / NEON / scalar implementations of the attention
//    inner loops, because f16 K/V conversion needs the F16C/AVX-512 (or AArch64) conversion
//    instructions and the score reduction must keep one fixed order.
#pragma once

#include "kernels/cpu/cpu_tier.hpp"

#include <cstdint>

// ThreadSanitizer instruments the ifunc resolvers of target_clones, which the loader runs before
// the TSan runtime exists (a crash at start-up): TSan builds use the baseline loops.
#if defined(__SANITIZE_THREAD__)
#define EMBER_NO_CLONES 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EMBER_NO_CLONES 1
#endif
#endif

// target_clones needs the loader's ifunc, which only ELF has: a MinGW-w64 (PE) build gets the
// baseline copies of those loops. VecOps' AVX2 and AVX-512 forms are plain functions with a
// target attribute, picked by the tier: every x86-64 GCC/Clang build has them, Windows included.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(EMBER_NO_CLONES)
#define EMBER_X86_DISPATCH 1
#else
#define EMBER_X86_DISPATCH 0
#endif
#if EMBER_X86_DISPATCH && defined(__ELF__)
#define EMBER_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define EMBER_CLONES
#endif

// arm64: the NEON form (kernels/cpu/arch/arm/attention_neon.cpp) serves every arm64 tier.
#if defined(__aarch64__) || defined(_M_ARM64)
#define EMBER_ARM_DISPATCH 1
#else
#define EMBER_ARM_DISPATCH 0
#endif

namespace ember::kernels::cpu {

// Keys scored by one VecOps::dot_keys_f32 call.
inline constexpr int kKeyChunk = 16;

// Inner loops of attention. n is any length >= 0 (tails handled).
struct VecOps {
  CpuTier tier;  // the lowest tier whose instructions these loops use
  // Scores of one chunk of up to kKeyChunk keys: s[j] = sum_i q[i] * k[j * stride + i] for
  // j < keys, i < n; s[keys..kKeyChunk) = 0. Each s[j] is summed in one fixed order that
  // depends only on n and j's place in the chunk, never on the other keys: attention stays
  // per-row deterministic (batch invariant). One call per 16 keys instead of a horizontal sum
  // per key is what makes prefill attention fast.
  void (*dot_keys_f32)(const float* q, const float* k, std::int64_t stride, int keys, int n, float* s);
  // y[i] += sum_r p[r] * x[r * stride + i] for r < rows: one chunk of V rows, y kept in
  // registers across the rows instead of a load/store per row.
  void (*axpy_rows_f32)(const float* p, const float* x, std::int64_t stride, int rows, float* y, int n);
  void (*to_f16)(const float* x, std::uint16_t* y, int n);    // round to nearest even
  void (*from_f16)(const std::uint16_t* x, float* y, int n);  // exact
  // dot_keys_f32 and axpy_rows_f32 on f16 rows, converted as they are read: the bits the f32
  // forms give on the rows from_f16 converts. A query that is alone on its chunk (a decode row
  // without grouped-query heads) saves writing and rereading the converted copy. Null where a
  // tier has no such form: attention then converts the chunk.
  void (*dot_keys_f16)(const float* q, const std::uint16_t* k, std::int64_t stride, int keys, int n,
                       float* s) = nullptr;
  void (*axpy_rows_f16)(const float* p, const std::uint16_t* x, std::int64_t stride, int rows, float* y,
                        int n) = nullptr;
};

// The widest implementation a CPU of `tier` runs (avx2's loops also serve avx_vnni; AVX-512F's
// serve avx512_vnni and amx); the caller checks tier_available(tier) (tests run every one).
const VecOps& vec_ops(CpuTier tier);
// The implementation of active_tier().
const VecOps& vec_ops();

#if EMBER_ARM_DISPATCH
// The NEON loops (kernels/cpu/arch/arm/attention_neon.cpp); vec_ops picks them.
const VecOps& vec_ops_neon();
#endif

}  // namespace ember::kernels::cpu
