#include "kernels/cpu/simd.hpp"

#include "util/fp16.hpp"

#if EMBER_X86_DISPATCH
#include <cpuid.h>
#include <immintrin.h>
// GCC 12's AVX-512 conversion intrinsics start from _mm512_undefined_*() and trip these
// warnings inside its own headers; nothing in this file reads an uninitialised value.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace ember::kernels::cpu {

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "?";
}

namespace {

// ---- scalar: the plain reference every vector path is tested against -------------------------

float dot_f32_scalar(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

float dot_f16_scalar(const float* a, const std::uint16_t* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * fp16_to_float(b[i]);
  return s;
}

void axpy_f32_scalar(float alpha, const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void axpy_f16_scalar(float alpha, const std::uint16_t* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += alpha * fp16_to_float(x[i]);
}

void to_f16_scalar(const float* x, std::uint16_t* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = float_to_fp16(x[i]);
}

void axpy_rows_f32_scalar(const float* p, const float* x, std::int64_t stride, int rows, float* y,
                          int n) {
  for (int r = 0; r < rows; ++r) axpy_f32_scalar(p[r], x + r * stride, y, n);
}

void axpy_rows_f16_scalar(const float* p, const std::uint16_t* x, std::int64_t stride, int rows,
                          float* y, int n) {
  for (int r = 0; r < rows; ++r) axpy_f16_scalar(p[r], x + r * stride, y, n);
}

#if EMBER_X86_DISPATCH

// ---- AVX2 + F16C + FMA -----------------------------------------------------------------------

#define EMBER_AVX2 __attribute__((target("avx2,f16c,fma")))

EMBER_AVX2 float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

EMBER_AVX2 float dot_f32_avx2(const float* a, const float* b, int n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float s = hsum256(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

EMBER_AVX2 __m256 load_f16x8(const std::uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

EMBER_AVX2 float dot_f16_avx2(const float* a, const std::uint16_t* b, int n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load_f16x8(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), load_f16x8(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load_f16x8(b + i), acc0);
  float s = hsum256(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * fp16_to_float(b[i]);
  return s;
}

EMBER_AVX2 void axpy_f32_avx2(float alpha, const float* x, float* y, int n) {
  const __m256 va = _mm256_set1_ps(alpha);
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += alpha * x[i];
}

EMBER_AVX2 void axpy_f16_avx2(float alpha, const std::uint16_t* x, float* y, int n) {
  const __m256 va = _mm256_set1_ps(alpha);
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, load_f16x8(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += alpha * fp16_to_float(x[i]);
}

EMBER_AVX2 void to_f16_avx2(const float* x, std::uint16_t* y, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = float_to_fp16(x[i]);
}

// Four vectors (32 floats) of y stay in registers across the rows; then 8 at a time; the tail
// column by column.
template <class T, class Load>
EMBER_AVX2 inline void axpy_rows_avx2(const float* p, const T* x, std::int64_t stride, int rows,
                                      float* y, int n, Load load) {
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 a0 = _mm256_loadu_ps(y + i), a1 = _mm256_loadu_ps(y + i + 8);
    __m256 a2 = _mm256_loadu_ps(y + i + 16), a3 = _mm256_loadu_ps(y + i + 24);
    for (int r = 0; r < rows; ++r) {
      const __m256 pr = _mm256_set1_ps(p[r]);
      const T* xr = x + r * stride + i;
      a0 = _mm256_fmadd_ps(pr, load(xr), a0);
      a1 = _mm256_fmadd_ps(pr, load(xr + 8), a1);
      a2 = _mm256_fmadd_ps(pr, load(xr + 16), a2);
      a3 = _mm256_fmadd_ps(pr, load(xr + 24), a3);
    }
    _mm256_storeu_ps(y + i, a0);
    _mm256_storeu_ps(y + i + 8, a1);
    _mm256_storeu_ps(y + i + 16, a2);
    _mm256_storeu_ps(y + i + 24, a3);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_loadu_ps(y + i);
    for (int r = 0; r < rows; ++r) a = _mm256_fmadd_ps(_mm256_set1_ps(p[r]), load(x + r * stride + i), a);
    _mm256_storeu_ps(y + i, a);
  }
  for (; i < n; ++i)
    for (int r = 0; r < rows; ++r) {
      if constexpr (sizeof(T) == 2)
        y[i] += p[r] * fp16_to_float(x[r * stride + i]);
      else
        y[i] += p[r] * x[r * stride + i];
    }
}

EMBER_AVX2 void axpy_rows_f32_avx2(const float* p, const float* x, std::int64_t stride, int rows,
                                   float* y, int n) {
  axpy_rows_avx2(p, x, stride, rows, y, n, [](const float* a) EMBER_AVX2 { return _mm256_loadu_ps(a); });
}

EMBER_AVX2 void axpy_rows_f16_avx2(const float* p, const std::uint16_t* x, std::int64_t stride,
                                   int rows, float* y, int n) {
  axpy_rows_avx2(p, x, stride, rows, y, n, [](const std::uint16_t* a) EMBER_AVX2 { return load_f16x8(a); });
}

// ---- AVX-512F --------------------------------------------------------------------------------

#define EMBER_AVX512 __attribute__((target("avx512f,avx2,f16c,fma")))

EMBER_AVX512 __m512 load_f16x16(const std::uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

EMBER_AVX512 float dot_f32_avx512(const float* a, const float* b, int n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  if (i < n) {  // a masked tail instead of a scalar one: head_dim 64/80/96/128 all end here
    const int left = n - i;
    const __mmask16 k0 = static_cast<__mmask16>(left >= 16 ? 0xffff : (1u << left) - 1);
    acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k0, a + i), _mm512_maskz_loadu_ps(k0, b + i), acc0);
    if (left > 16) {
      const __mmask16 k1 = static_cast<__mmask16>((1u << (left - 16)) - 1);
      acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k1, a + i + 16),
                             _mm512_maskz_loadu_ps(k1, b + i + 16), acc1);
    }
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

EMBER_AVX512 float dot_f16_avx512(const float* a, const std::uint16_t* b, int n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), load_f16x16(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), load_f16x16(b + i + 16), acc1);
  }
  for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), load_f16x16(b + i), acc0);
  float s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * fp16_to_float(b[i]);
  return s;
}

EMBER_AVX512 void axpy_f32_avx512(float alpha, const float* x, float* y, int n) {
  const __m512 va = _mm512_set1_ps(alpha);
  int i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += alpha * x[i];
}

EMBER_AVX512 void axpy_f16_avx512(float alpha, const std::uint16_t* x, float* y, int n) {
  const __m512 va = _mm512_set1_ps(alpha);
  int i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, load_f16x16(x + i), _mm512_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += alpha * fp16_to_float(x[i]);
}

EMBER_AVX512 void to_f16_avx512(const float* x, std::uint16_t* y, int n) {
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = float_to_fp16(x[i]);
}

template <class T, class Load>
EMBER_AVX512 inline void axpy_rows_avx512(const float* p, const T* x, std::int64_t stride, int rows,
                                          float* y, int n, Load load) {
  int i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512 a0 = _mm512_loadu_ps(y + i), a1 = _mm512_loadu_ps(y + i + 16);
    __m512 a2 = _mm512_loadu_ps(y + i + 32), a3 = _mm512_loadu_ps(y + i + 48);
    for (int r = 0; r < rows; ++r) {
      const __m512 pr = _mm512_set1_ps(p[r]);
      const T* xr = x + r * stride + i;
      a0 = _mm512_fmadd_ps(pr, load(xr), a0);
      a1 = _mm512_fmadd_ps(pr, load(xr + 16), a1);
      a2 = _mm512_fmadd_ps(pr, load(xr + 32), a2);
      a3 = _mm512_fmadd_ps(pr, load(xr + 48), a3);
    }
    _mm512_storeu_ps(y + i, a0);
    _mm512_storeu_ps(y + i + 16, a1);
    _mm512_storeu_ps(y + i + 32, a2);
    _mm512_storeu_ps(y + i + 48, a3);
  }
  for (; i + 16 <= n; i += 16) {
    __m512 a = _mm512_loadu_ps(y + i);
    for (int r = 0; r < rows; ++r) a = _mm512_fmadd_ps(_mm512_set1_ps(p[r]), load(x + r * stride + i), a);
    _mm512_storeu_ps(y + i, a);
  }
  for (; i < n; ++i)
    for (int r = 0; r < rows; ++r) {
      if constexpr (sizeof(T) == 2)
        y[i] += p[r] * fp16_to_float(x[r * stride + i]);
      else
        y[i] += p[r] * x[r * stride + i];
    }
}

EMBER_AVX512 void axpy_rows_f32_avx512(const float* p, const float* x, std::int64_t stride,
                                       int rows, float* y, int n) {
  axpy_rows_avx512(p, x, stride, rows, y, n, [](const float* a) EMBER_AVX512 { return _mm512_loadu_ps(a); });
}

EMBER_AVX512 void axpy_rows_f16_avx512(const float* p, const std::uint16_t* x, std::int64_t stride,
                                       int rows, float* y, int n) {
  axpy_rows_avx512(p, x, stride, rows, y, n, [](const std::uint16_t* a) EMBER_AVX512 { return load_f16x16(a); });
}

#endif  // EMBER_X86_DISPATCH

constexpr VecOps kScalar{Isa::scalar,         dot_f32_scalar,       dot_f16_scalar,
                         axpy_f32_scalar,     axpy_f16_scalar,      to_f16_scalar,
                         axpy_rows_f32_scalar, axpy_rows_f16_scalar};
#if EMBER_X86_DISPATCH
constexpr VecOps kAvx2{Isa::avx2,       dot_f32_avx2,       dot_f16_avx2,      axpy_f32_avx2,
                       axpy_f16_avx2,    to_f16_avx2,        axpy_rows_f32_avx2, axpy_rows_f16_avx2};
constexpr VecOps kAvx512{Isa::avx512,       dot_f32_avx512,       dot_f16_avx512,
                         axpy_f32_avx512,   axpy_f16_avx512,      to_f16_avx512,
                         axpy_rows_f32_avx512, axpy_rows_f16_avx512};
#endif

#if EMBER_X86_DISPATCH
// CPUID leaf 1, ECX bit 29: clang before 16 rejects "f16c" in __builtin_cpu_supports.
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

Isa detect_isa() {
#if EMBER_X86_DISPATCH
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return Isa::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c())
    return Isa::avx2;
#endif
  return Isa::scalar;
}

}  // namespace

Isa best_isa() {
  static const Isa isa = detect_isa();  // immutable after the first call
  return isa;
}

bool isa_supported(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(best_isa()); }

const VecOps& vec_ops(Isa isa) {
#if EMBER_X86_DISPATCH
  if (isa == Isa::avx512 && isa_supported(isa)) return kAvx512;
  if (isa == Isa::avx2 && isa_supported(isa)) return kAvx2;
#endif
  (void)isa;
  return kScalar;
}

const VecOps& vec_ops() { return vec_ops(best_isa()); }

}  // namespace ember::kernels::cpu
