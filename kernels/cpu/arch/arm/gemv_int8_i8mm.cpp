// The INT8 GEMV at the i8mm tier, for two or more rows (prefill, batches): smmla multiplies a
// 2 x 8 block of signed activations (two rows, 8 inputs) by a 2 x 8 block of weights (two
// outputs, the same 8 inputs) into the 2 x 2 INT32 sums, 32 products an instruction where sdot
// makes 16. The layout's [16 outputs][4 inputs] lines of steps k and k + 1, interleaved by
// 32-bit words (zip1/zip2), are those 2 x 8 weight blocks; a zip serves every row pair of a
// pass. A single row (decode, or the last of an odd count) runs the dotprod tier's loop. The
// sums are exact and the epilogue is gemv_int8_tiers.hpp's, lane by lane, so the results equal
// every other tier's bit for bit. Compiled with -march=armv8.2-a+dotprod+i8mm
// -ffp-contract=off for this file only (kernels/CMakeLists.txt).
#include "kernels/cpu/gemv_int8_tiers.hpp"

#include <arm_neon.h>

namespace ember::kernels::cpu {

namespace {

[[gnu::always_inline]] inline int32x4_t dot4(int32x4_t acc, int8x16_t w, int8x16_t x) { return vdotq_s32(acc, w, x); }

}  // namespace

#include "kernels/cpu/arch/arm/gemv_int8_arm.inc"

namespace {

// Rows i and i + 1's 8 activations from input 4k, signed (u8 = q + 128 with the sign bit
// flipped); `half`: only inputs 4k..4k+3 exist (the last step of an odd count), the rest is 0.
[[gnu::always_inline]] inline int8x16_t row_pair(const std::uint8_t* x0, const std::uint8_t* x1, bool half) {
  uint8x16_t u;
  if (half) {
    std::uint32_t a, b;
    __builtin_memcpy(&a, x0, 4);
    __builtin_memcpy(&b, x1, 4);
    u = vreinterpretq_u8_u64(vcombine_u64(vcreate_u64(a ^ 0x80808080u), vcreate_u64(b ^ 0x80808080u)));
    return vreinterpretq_s8_u8(u);
  }
  u = vcombine_u8(vld1_u8(x0), vld1_u8(x1));
  return vreinterpretq_s8_u8(veorq_u8(u, vdupq_n_u8(0x80)));
}

// P row pairs from row i against blocks [b0, b0 + NB) of the tile: acc[p][b][h] holds rows
// i + 2p, i + 2p + 1 against outputs 2h, 2h + 1 of block b0 + b (8 registers a block and pair).
template <int P, int NB>
void pair_pass(const GemvTileArgs& a, int b0, std::int64_t i) {
  const std::int64_t steps = a.steps, ldx = a.ldx, line = a.blocks * 64;  // bytes a step
  const std::uint8_t* xu = a.xu + i * ldx;
  int32x4_t acc[P][NB][8];
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b)
#pragma GCC unroll 8
      for (int h = 0; h < 8; ++h) acc[p][b][h] = vdupq_n_s32(0);
  for (std::int64_t k = 0; k < steps; k += 2) {
    const bool half = k + 1 == steps;
    const std::int8_t* w0 = a.tile + k * line + b0 * 64;
    if (i == 0)
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b) {
        __builtin_prefetch(w0 + b * 64 + a.prefetch_ahead);
        __builtin_prefetch(w0 + line + b * 64 + a.prefetch_ahead);
      }
    int8x16_t x[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const std::uint8_t* x0 = xu + 2 * p * ldx + 4 * k;
      x[p] = row_pair(x0, x0 + ldx, half);
    }
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b)
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const int32x4_t l0 = vreinterpretq_s32_s8(vld1q_s8(w0 + b * 64 + q * 16));
        const int32x4_t l1 = half ? vdupq_n_s32(0) : vreinterpretq_s32_s8(vld1q_s8(w0 + line + b * 64 + q * 16));
        const int8x16_t lo = vreinterpretq_s8_s32(vzip1q_s32(l0, l1));  // outputs 4q, 4q + 1
        const int8x16_t hi = vreinterpretq_s8_s32(vzip2q_s32(l0, l1));  // outputs 4q + 2, 4q + 3
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          acc[p][b][2 * q] = vmmlaq_s32(acc[p][b][2 * q], x[p], lo);
          acc[p][b][2 * q + 1] = vmmlaq_s32(acc[p][b][2 * q + 1], x[p], hi);
        }
      }
  }
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b)
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const std::int64_t o = (b0 + b) * 16 + q * 4, left = a.rows_left - o;
      if (left <= 0) return;
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        // [r0o0 r0o1 r1o0 r1o1] and [r0o2 r0o3 r1o2 r1o3] to each row's 4 outputs.
        const int64x2_t s0 = vreinterpretq_s64_s32(acc[p][b][2 * q]), s1 = vreinterpretq_s64_s32(acc[p][b][2 * q + 1]);
        const std::int64_t r = i + 2 * p;
        store4(vreinterpretq_s32_s64(vzip1q_s64(s0, s1)), a.w_scales + o, a.x_scales[r], a.y + r * a.ldy + o, left,
               a.accumulate);
        store4(vreinterpretq_s32_s64(vzip2q_s64(s0, s1)), a.w_scales + o, a.x_scales[r + 1], a.y + (r + 1) * a.ldy + o,
               left, a.accumulate);
      }
    }
}

// Rows [0, pairs) in pairs against blocks [b0, b0 + NB): two pairs a pass with one block (16
// accumulators either way).
template <int NB>
void pair_rows(const GemvTileArgs& a, int b0, std::int64_t pairs) {
  std::int64_t i = 0;
  if constexpr (NB == 1)
    for (; i + 4 <= pairs; i += 4) pair_pass<2, 1>(a, b0, i);
  for (; i < pairs; i += 2) pair_pass<1, NB>(a, b0, i);
}

}  // namespace

void gemv_tile_i8mm(const GemvTileArgs& a) {
  if (a.m < 2) return run_tile(a);
  const std::int64_t pairs = a.m & ~std::int64_t{1};
  int b0 = 0;
  for (; b0 + 2 <= a.blocks; b0 += 2) pair_rows<2>(a, b0, pairs);
  if (b0 < a.blocks) pair_rows<1>(a, b0, pairs);
  if (pairs == a.m) return;
  // The last row of an odd count on sdot (the dotprod tier's loop).
  GemvTileArgs last = a;
  last.xu += pairs * a.ldx;
  last.x_scales += pairs;
  last.y += pairs * a.ldy;
  last.m = 1;
  last.prefetch_ahead = 0;
  run_tile(last);
}

}  // namespace ember::kernels::cpu
