// The grouped kernel's activation quantizer on AVX2: a group of 32 values in four registers, its
// q, scale and sum formed there, where the portable form makes two calls and three passes over
// the group (quantize_rows_s8, then the sum). The bytes, scales and sums are the portable
// form's: the same maximum (NaN skipped: the running maximum is always the second operand of
// vmaxps, which returns it when either is NaN), the same float operations in the same order
// (compiled with -ffp-contract=off, kernels/CMakeLists.txt), the same clamp (a NaN element
// becomes -127 on both), and integer sums.
#include "kernels/cpu/gemm_grouped_tiers.hpp"

#include <immintrin.h>

#include <cmath>

namespace ember::kernels::cpu::grouped {

void quantize_groups_avx2(const float* x, std::int64_t groups, std::int8_t* q, float* scales, std::int32_t* sums) {
  const __m256 magnitude_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 round = _mm256_set1_ps(12582912.0f), qmax = _mm256_set1_ps(127.0f), qmin = _mm256_set1_ps(-127.0f);
  // packs_epi16 leaves each register's 4-byte pieces as [0-3 of v0..v3 | 4-7 of v0..v3].
  const __m256i in_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (std::int64_t g = 0; g < groups; ++g) {
    const float* xg = x + g * 32;
    std::int8_t* qg = q + g * 32;
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(xg + 8 * k);
      m = _mm256_max_ps(_mm256_and_ps(v[k], magnitude_mask), m);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    // All zero, non-finite, or a reciprocal that overflows: scale 0 (quantize.cpp's quantize_one).
    if (!(amax > 0.0f) || !std::isfinite(amax) || !std::isfinite(127.0f / amax)) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qg), _mm256_setzero_si256());
      scales[g] = 0.0f;
      sums[g] = 0;
      continue;
    }
    scales[g] = amax / 127.0f;
    const __m256 inv = _mm256_set1_ps(127.0f / amax);
    __m256i i[4];
    for (int k = 0; k < 4; ++k) {
      const __m256 r = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(v[k], inv), round), round);
      i[k] = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(r, qmin), qmax));
    }
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
    sums[g] = _mm_cvtsi128_si32(s4);
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qg), _mm256_permutevar8x32_epi32(bytes, in_order));
  }
}

}  // namespace ember::kernels::cpu::grouped
