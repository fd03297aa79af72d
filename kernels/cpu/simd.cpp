#include "kernels/cpu/simd.hpp"

#include "kernels/cpu/math.hpp"
#include "util/fp16.hpp"

#include <algorithm>
#include <cmath>

#if EMBER_X86_DISPATCH
#include <immintrin.h>
// GCC 12's AVX-512 conversion intrinsics start from _mm512_undefined_*() and trip these
// warnings inside its own headers; nothing in this file reads an uninitialised value.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning, which Clang does not know
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace ember::kernels::cpu {

namespace {

// ---- scalar: the plain reference every vector path equals bit for bit -------------------------
//
// One order of operations on every tier (simd.hpp), so that attention, like the INT8 products,
// gives the same bits on every CPU:
//  * dot_keys: dims [0, n & ~15) in 16 lanes, lane l summing dims l, l + 16, ... with fused
//    multiply-adds; the lanes reduced as ((l0+l8) + (l4+l12)), the four results e = 0..3 as
//    (e0 + e2) + (e1 + e3) (the AVX-512 shuffle tree); then the dims past the last 16 added one
//    by one, multiply then add.
//  * axpy_rows: for each element, the even rows fused-multiply-added onto y, the odd rows onto a
//    second sum from zero, then the two added.

// A stored key or value as a float: an f16 one converted (exactly), so the f16 entry points give
// the bits the f32 ones give on the converted chunk.
inline float value_of(float x) { return x; }
inline float value_of(std::uint16_t x) { return fp16_to_float(x); }

// Dims [from, n) of `keys` keys added to s one by one, not fused (this file is compiled with
// -ffp-contract=off, kernels/CMakeLists.txt: the vector functions that inline this have FMA).
template <class T>
void add_tail_dims(const float* q, const T* k, std::int64_t stride, int keys, int from, int n, float* s) {
  for (int j = 0; j < keys; ++j)
    for (int i = from; i < n; ++i) {
      const float product = q[i] * value_of(k[j * stride + i]);
      s[j] = s[j] + product;
    }
}

// The 16-lane reduction of the file comment.
float reduce16(const float* lane) {
  float e[4];
  for (int i = 0; i < 4; ++i) e[i] = (lane[i] + lane[8 + i]) + (lane[4 + i] + lane[12 + i]);
  return (e[0] + e[2]) + (e[1] + e[3]);
}

template <class T>
void dot_keys_scalar(const float* q, const T* k, std::int64_t stride, int keys, int n, float* s) {
  for (int j = 0; j < kKeyChunk; ++j) {
    float lane[16] = {};
    for (int i = 0; j < keys && i + 16 <= n; i += 16)
      for (int l = 0; l < 16; ++l) lane[l] = fused_multiply_add(q[i + l], value_of(k[j * stride + i + l]), lane[l]);
    s[j] = j < keys ? reduce16(lane) : 0.0f;
  }
  add_tail_dims(q, k, stride, std::min(keys, kKeyChunk), n & ~15, n, s);
}

template <class T>
void axpy_rows_scalar(const float* p, const T* x, std::int64_t stride, int rows, float* y, int n) {
  for (int i = 0; i < n; ++i) {
    float even = y[i], odd = 0.0f;
    int r = 0;
    for (; r + 2 <= rows; r += 2) {
      even = fused_multiply_add(p[r], value_of(x[r * stride + i]), even);
      odd = fused_multiply_add(p[r + 1], value_of(x[(r + 1) * stride + i]), odd);
    }
    if (r < rows) even = fused_multiply_add(p[r], value_of(x[r * stride + i]), even);
    y[i] = even + odd;
  }
}

void to_f16_scalar(const float* x, std::uint16_t* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = float_to_fp16(x[i]);
}

void from_f16_scalar(const std::uint16_t* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = fp16_to_float(x[i]);
}

#if EMBER_X86_DISPATCH

// ---- AVX2 + F16C + FMA -----------------------------------------------------------------------

#define EMBER_AVX2 __attribute__((target("avx2,f16c,fma")))

// Eight stored values as floats (an f16 row converted as it is loaded, exactly): see load16.
EMBER_AVX2 inline __m256 load8(const float* x) { return _mm256_loadu_ps(x); }
EMBER_AVX2 inline __m256 load8(const std::uint16_t* x) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
}

// Four keys at a time, each in two accumulators (lanes 0-7 and 8-15 of the 16 lanes of the
// order in the scalar section), reduced with the same additions. Keys past `keys` are zero.
template <class T>
EMBER_AVX2 void dot_keys4_avx2(const float* q, const T* k, std::int64_t stride, int keys, int n, float* s) {
  __m256 lo[4], hi[4];
  for (int j = 0; j < 4; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
  const int real = keys < 4 ? keys : 4;
  for (int i = 0; i + 16 <= n; i += 16) {
    const __m256 q0 = _mm256_loadu_ps(q + i), q1 = _mm256_loadu_ps(q + i + 8);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const T* kj = k + (j < real ? j : real - 1) * stride + i;
      lo[j] = _mm256_fmadd_ps(q0, load8(kj), lo[j]);
      hi[j] = _mm256_fmadd_ps(q1, load8(kj + 8), hi[j]);
    }
  }
  for (int j = 0; j < 4; ++j) {
    const __m256 t = _mm256_add_ps(lo[j], hi[j]);                                         // l + (l + 8)
    const __m128 e = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));  // e0..e3
    const __m128 f = _mm_add_ps(e, _mm_movehl_ps(e, e));                                  // e0+e2, e1+e3
    s[j] = j < real ? _mm_cvtss_f32(_mm_add_ss(f, _mm_shuffle_ps(f, f, 1))) : 0.0f;
  }
}

template <class T>
EMBER_AVX2 void dot_keys_avx2(const float* q, const T* k, std::int64_t stride, int keys, int n, float* s) {
  for (int j0 = 0; j0 < kKeyChunk; j0 += 4) {
    if (j0 < keys) {
      dot_keys4_avx2(q, k + j0 * stride, stride, keys - j0, n, s + j0);
    } else {
      for (int j = j0; j < j0 + 4; ++j) s[j] = 0.0f;
    }
  }
  add_tail_dims(q, k, stride, std::min(keys, kKeyChunk), n & ~15, n, s);
}

// One element's even and odd sums of the scalar section, 8 (then 1) at a time.
template <class T>
EMBER_AVX2 void axpy_rows_avx2(const float* p, const T* x, std::int64_t stride, int rows, float* y, int n) {
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 a0 = _mm256_loadu_ps(y + i), a1 = _mm256_loadu_ps(y + i + 8);
    __m256 b0 = _mm256_setzero_ps(), b1 = b0;
    int r = 0;
    for (; r + 2 <= rows; r += 2) {
      const __m256 p0 = _mm256_set1_ps(p[r]), p1 = _mm256_set1_ps(p[r + 1]);
      const T* x0 = x + r * stride + i;
      const T* x1 = x0 + stride;
      a0 = _mm256_fmadd_ps(p0, load8(x0), a0);
      a1 = _mm256_fmadd_ps(p0, load8(x0 + 8), a1);
      b0 = _mm256_fmadd_ps(p1, load8(x1), b0);
      b1 = _mm256_fmadd_ps(p1, load8(x1 + 8), b1);
    }
    if (r < rows) {
      const __m256 p0 = _mm256_set1_ps(p[r]);
      a0 = _mm256_fmadd_ps(p0, load8(x + r * stride + i), a0);
      a1 = _mm256_fmadd_ps(p0, load8(x + r * stride + i + 8), a1);
    }
    _mm256_storeu_ps(y + i, _mm256_add_ps(a0, b0));
    _mm256_storeu_ps(y + i + 8, _mm256_add_ps(a1, b1));
  }
  axpy_rows_scalar(p, x + i, stride, rows, y + i, n - i);
}

EMBER_AVX2 void to_f16_avx2(const float* x, std::uint16_t* y, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = float_to_fp16(x[i]);
}

EMBER_AVX2 void from_f16_avx2(const std::uint16_t* x, float* y, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) y[i] = fp16_to_float(x[i]);
}

// ---- AVX-512F --------------------------------------------------------------------------------

#define EMBER_AVX512 __attribute__((target("avx512f,avx2,f16c,fma")))

// Sixteen accumulators to one vector: lane 4L+k of the result is the sum of a[4k+L]. Four
// levels of 128-bit-lane shuffles and in-lane unpacks, 45 instructions for 16 sums instead of
// a full horizontal reduction per key.
EMBER_AVX512 inline __m512 sum_pair_halves(__m512 x, __m512 y) {  // lanes 0,1: x's; 2,3: y's
  return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xEE));
}
EMBER_AVX512 inline __m512 sum_pair_quarters(__m512 x, __m512 y) {  // lane L: input L's four
  return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x88), _mm512_shuffle_f32x4(x, y, 0xDD));
}
EMBER_AVX512 inline __m512 sum_each16(__m512 a0, __m512 a1, __m512 a2, __m512 a3, __m512 a4, __m512 a5, __m512 a6,
                                      __m512 a7, __m512 a8, __m512 a9, __m512 a10, __m512 a11, __m512 a12, __m512 a13,
                                      __m512 a14, __m512 a15) {
  const __m512 c0 = sum_pair_quarters(sum_pair_halves(a0, a1), sum_pair_halves(a2, a3));
  const __m512 c1 = sum_pair_quarters(sum_pair_halves(a4, a5), sum_pair_halves(a6, a7));
  const __m512 c2 = sum_pair_quarters(sum_pair_halves(a8, a9), sum_pair_halves(a10, a11));
  const __m512 c3 = sum_pair_quarters(sum_pair_halves(a12, a13), sum_pair_halves(a14, a15));
  const __m512 d0 = _mm512_add_ps(_mm512_unpacklo_ps(c0, c1), _mm512_unpackhi_ps(c0, c1));
  const __m512 d1 = _mm512_add_ps(_mm512_unpacklo_ps(c2, c3), _mm512_unpackhi_ps(c2, c3));
  return _mm512_add_ps(_mm512_shuffle_ps(d0, d1, 0x44), _mm512_shuffle_ps(d0, d1, 0xEE));
}

// Sixteen stored values as floats: an f16 row is converted as it is loaded (exact), so a decode
// query reads its chunk once instead of through a converted copy.
EMBER_AVX512 inline __m512 load16(const float* x) { return _mm512_loadu_ps(x); }
EMBER_AVX512 inline __m512 load16(const std::uint16_t* x) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
}

// One key's step: acc += q * k, then on to the next key unless this one is the last real one.
template <class T>
EMBER_AVX512 inline void fma_key(__m512& acc, __m512 q, const T*& k, std::int64_t stride, bool advance) {
  acc = _mm512_fmadd_ps(q, load16(k), acc);
  if (advance) k += stride;
}

template <class T>
EMBER_AVX512 void dot_keys_avx512(const float* q, const T* k, std::int64_t stride, int keys, int n, float* s) {
  // Key j accumulates in a{4 * (j % 4) + j / 4} so that sum_each16 leaves its sum in lane j.
  // Keys past `keys` repeat the last real key (no read past the chunk) and are zeroed. Sixteen
  // named accumulators, not an array, so that they stay in registers; the key loop is innermost:
  // 16 independent FMA chains per q vector.
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0,
         a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0, a15 = a0;
  for (int i = 0; i + 16 <= n; i += 16) {
    const __m512 qi = _mm512_loadu_ps(q + i);
    const T* kj = k + i;
    fma_key(a0, qi, kj, stride, 1 < keys);
    fma_key(a4, qi, kj, stride, 2 < keys);
    fma_key(a8, qi, kj, stride, 3 < keys);
    fma_key(a12, qi, kj, stride, 4 < keys);
    fma_key(a1, qi, kj, stride, 5 < keys);
    fma_key(a5, qi, kj, stride, 6 < keys);
    fma_key(a9, qi, kj, stride, 7 < keys);
    fma_key(a13, qi, kj, stride, 8 < keys);
    fma_key(a2, qi, kj, stride, 9 < keys);
    fma_key(a6, qi, kj, stride, 10 < keys);
    fma_key(a10, qi, kj, stride, 11 < keys);
    fma_key(a14, qi, kj, stride, 12 < keys);
    fma_key(a3, qi, kj, stride, 13 < keys);
    fma_key(a7, qi, kj, stride, 14 < keys);
    fma_key(a11, qi, kj, stride, 15 < keys);
    fma_key(a15, qi, kj, stride, false);
  }
  const __mmask16 real = static_cast<__mmask16>(keys >= 16 ? 0xffff : (1u << keys) - 1);
  const __m512 sums = sum_each16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15);
  _mm512_storeu_ps(s, _mm512_maskz_mov_ps(real, sums));
  add_tail_dims(q, k, stride, keys, n & ~15, n, s);
}

// Sixty-four floats of y stay in registers across the rows, in two sets of four accumulators
// (even and odd rows, the order of the scalar section) so that two FMA chains run at once.
template <class T>
EMBER_AVX512 void axpy_rows_avx512(const float* p, const T* x, std::int64_t stride, int rows, float* y, int n) {
  int i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512 a[4], b[4];
    for (int c = 0; c < 4; ++c) {
      a[c] = _mm512_loadu_ps(y + i + 16 * c);
      b[c] = _mm512_setzero_ps();
    }
    int r = 0;
    for (; r + 2 <= rows; r += 2) {
      const __m512 p0 = _mm512_set1_ps(p[r]), p1 = _mm512_set1_ps(p[r + 1]);
      const T* x0 = x + r * stride + i;
      const T* x1 = x0 + stride;
      for (int c = 0; c < 4; ++c) {
        a[c] = _mm512_fmadd_ps(p0, load16(x0 + 16 * c), a[c]);
        b[c] = _mm512_fmadd_ps(p1, load16(x1 + 16 * c), b[c]);
      }
    }
    if (r < rows) {
      const __m512 p0 = _mm512_set1_ps(p[r]);
      for (int c = 0; c < 4; ++c) a[c] = _mm512_fmadd_ps(p0, load16(x + r * stride + i + 16 * c), a[c]);
    }
    for (int c = 0; c < 4; ++c) _mm512_storeu_ps(y + i + 16 * c, _mm512_add_ps(a[c], b[c]));
  }
  axpy_rows_avx2(p, x + i, stride, rows, y + i, n - i);  // the rest, in the scalar order as well
}

EMBER_AVX512 void to_f16_avx512(const float* x, std::uint16_t* y, int n) {
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = float_to_fp16(x[i]);
}

EMBER_AVX512 void from_f16_avx512(const std::uint16_t* x, float* y, int n) {
  int i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))));
  for (; i < n; ++i) y[i] = fp16_to_float(x[i]);
}

#endif  // EMBER_X86_DISPATCH

// The f32 and f16 forms of each loop are one template's two instantiations.
constexpr VecOps kScalar{CpuTier::scalar, dot_keys_scalar<float>,         axpy_rows_scalar<float>,        to_f16_scalar,
                         from_f16_scalar, dot_keys_scalar<std::uint16_t>, axpy_rows_scalar<std::uint16_t>};
#if EMBER_X86_DISPATCH
constexpr VecOps kAvx2{CpuTier::avx2, dot_keys_avx2<float>,         axpy_rows_avx2<float>,        to_f16_avx2,
                       from_f16_avx2, dot_keys_avx2<std::uint16_t>, axpy_rows_avx2<std::uint16_t>};
constexpr VecOps kAvx512{
    CpuTier::avx512_vnni, dot_keys_avx512<float>,         axpy_rows_avx512<float>,        to_f16_avx512,
    from_f16_avx512,      dot_keys_avx512<std::uint16_t>, axpy_rows_avx512<std::uint16_t>};
#endif

}  // namespace

const VecOps& vec_ops(CpuTier tier) {
#if EMBER_X86_DISPATCH
  if (tier >= CpuTier::avx512_vnni && tier_available(tier)) return kAvx512;
  if (tier >= CpuTier::avx2 && tier_available(tier)) return kAvx2;
#endif
#if EMBER_ARM_DISPATCH
  if (is_arm_tier(tier) && tier_available(tier)) return vec_ops_neon();
#endif
  (void)tier;
  return kScalar;
}

const VecOps& vec_ops() { return vec_ops(active_tier()); }

}  // namespace ember::kernels::cpu
