// The attention inner loops (simd.hpp's VecOps) at the arm64 tiers: Advanced SIMD is the AArch64
// baseline, so one form serves neon, dotprod and i8mm. Each loop performs the scalar form's
// float operations in its order (simd.cpp's file comment): 16 lanes of fused multiply-adds per
// key reduced as ((l0 + l8) + (l4 + l12)) then (e0 + e2) + (e1 + e3), the even and odd rows of
// a V chunk in two sums, half conversions rounded to nearest even. The result equals the scalar
// form bit for bit (kernels_test compares them under qemu). Compiled with -ffp-contract=off
// (cmake/EmberCompilerFlags.cmake): the only fused operations are the written vfmaq ones.
#include "kernels/cpu/simd.hpp"
#include "util/fp16.hpp"

#include <arm_neon.h>

#include <cmath>

namespace ember::kernels::cpu {

namespace {

// Dims [from, n) of `keys` keys added to s one by one, multiply then add (the scalar tail).
void add_tail_dims(const float* q, const float* k, std::int64_t stride, int keys, int from, int n, float* s) {
  for (int j = 0; j < keys; ++j)
    for (int i = from; i < n; ++i) {
      const float product = q[i] * k[j * stride + i];
      s[j] = s[j] + product;
    }
}

// Four keys at a time, each in four accumulators: lanes 0-3, 4-7, 8-11 and 12-15 of the 16
// lanes of the scalar order. Keys past `keys` read the last real key (no read past the chunk)
// and score zero.
void dot_keys4(const float* q, const float* k, std::int64_t stride, int keys, int n, float* s) {
  float32x4_t a[4][4];
  for (auto& key : a)
    for (float32x4_t& quarter : key) quarter = vdupq_n_f32(0.0f);
  const int real = keys < 4 ? keys : 4;
  for (int i = 0; i + 16 <= n; i += 16) {
    const float32x4_t q0 = vld1q_f32(q + i), q1 = vld1q_f32(q + i + 4), q2 = vld1q_f32(q + i + 8),
                      q3 = vld1q_f32(q + i + 12);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const float* kj = k + (j < real ? j : real - 1) * stride + i;
      a[j][0] = vfmaq_f32(a[j][0], q0, vld1q_f32(kj));
      a[j][1] = vfmaq_f32(a[j][1], q1, vld1q_f32(kj + 4));
      a[j][2] = vfmaq_f32(a[j][2], q2, vld1q_f32(kj + 8));
      a[j][3] = vfmaq_f32(a[j][3], q3, vld1q_f32(kj + 12));
    }
  }
  for (int j = 0; j < 4; ++j) {
    const float32x4_t e = vaddq_f32(vaddq_f32(a[j][0], a[j][2]), vaddq_f32(a[j][1], a[j][3]));  // e0..e3
    const float32x2_t f = vadd_f32(vget_low_f32(e), vget_high_f32(e));                          // e0+e2, e1+e3
    s[j] = j < real ? vpadds_f32(f) : 0.0f;
  }
}

void dot_keys_f32_neon(const float* q, const float* k, std::int64_t stride, int keys, int n, float* s) {
  for (int j0 = 0; j0 < kKeyChunk; j0 += 4) {
    if (j0 < keys) {
      dot_keys4(q, k + j0 * stride, stride, keys - j0, n, s + j0);
    } else {
      for (int j = j0; j < j0 + 4; ++j) s[j] = 0.0f;
    }
  }
  add_tail_dims(q, k, stride, keys < kKeyChunk ? keys : kKeyChunk, n & ~15, n, s);
}

// Elements [i, i + 4 * C) of y: the even rows fused onto y, the odd ones onto a sum from zero,
// then the two added (the scalar order for each element).
template <int C>
void axpy_block(const float* p, const float* x, std::int64_t stride, int rows, float* y) {
  float32x4_t a[C], b[C];
  for (int c = 0; c < C; ++c) {
    a[c] = vld1q_f32(y + 4 * c);
    b[c] = vdupq_n_f32(0.0f);
  }
  int r = 0;
  for (; r + 2 <= rows; r += 2) {
    const float* x0 = x + r * stride;
    const float* x1 = x0 + stride;
    for (int c = 0; c < C; ++c) {
      a[c] = vfmaq_n_f32(a[c], vld1q_f32(x0 + 4 * c), p[r]);
      b[c] = vfmaq_n_f32(b[c], vld1q_f32(x1 + 4 * c), p[r + 1]);
    }
  }
  if (r < rows)
    for (int c = 0; c < C; ++c) a[c] = vfmaq_n_f32(a[c], vld1q_f32(x + r * stride + 4 * c), p[r]);
  for (int c = 0; c < C; ++c) vst1q_f32(y + 4 * c, vaddq_f32(a[c], b[c]));
}

void axpy_rows_f32_neon(const float* p, const float* x, std::int64_t stride, int rows, float* y, int n) {
  int i = 0;
  for (; i + 16 <= n; i += 16) axpy_block<4>(p, x + i, stride, rows, y + i);
  for (; i + 4 <= n; i += 4) axpy_block<1>(p, x + i, stride, rows, y + i);
  for (; i < n; ++i) {
    float even = y[i], odd = 0.0f;
    int r = 0;
    for (; r + 2 <= rows; r += 2) {
      even = std::fma(p[r], x[r * stride + i], even);
      odd = std::fma(p[r + 1], x[(r + 1) * stride + i], odd);
    }
    if (r < rows) even = std::fma(p[r], x[r * stride + i], even);
    y[i] = even + odd;
  }
}

// fcvtn rounds to nearest even (the FPCR's default mode) and overflows to infinity like the
// scalar form; its NaNs keep their payload, so NaN lanes are replaced by the scalar form's
// (the sign and 0x7e00).
uint16x4_t to_f16x4(float32x4_t v) {
  const uint32x4_t bits = vreinterpretq_u32_f32(v);
  const uint32x4_t nan = vcgtq_u32(vandq_u32(bits, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000u));
  const uint16x4_t quiet =
      vmovn_u32(vorrq_u32(vandq_u32(vshrq_n_u32(bits, 16), vdupq_n_u32(0x8000u)), vdupq_n_u32(0x7e00u)));
  return vbsl_u16(vmovn_u32(nan), quiet, vreinterpret_u16_f16(vcvt_f16_f32(v)));
}

void to_f16_neon(const float* x, std::uint16_t* y, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) vst1_u16(y + i, to_f16x4(vld1q_f32(x + i)));
  for (; i < n; ++i) y[i] = float_to_fp16(x[i]);
}

// fcvtl is exact; a half NaN keeps its payload and gains the quiet bit, as the scalar form keeps
// the payload of the quiet NaNs to_f16 makes.
void from_f16_neon(const std::uint16_t* x, float* y, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
  for (; i < n; ++i) y[i] = fp16_to_float(x[i]);
}

constexpr VecOps kNeon{CpuTier::neon, dot_keys_f32_neon, axpy_rows_f32_neon, to_f16_neon, from_f16_neon};

}  // namespace

const VecOps& vec_ops_neon() { return kNeon; }

}  // namespace ember::kernels::cpu
