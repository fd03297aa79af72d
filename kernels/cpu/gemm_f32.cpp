#include "kernels/cpu/gemm_f32.hpp"

#include "kernels/cpu/simd.hpp"

#include <algorithm>

namespace ember::kernels::cpu {

namespace {

// Rows [r, r + 4) against output c: the weight row is read once for the four dot products.
EMBER_CLONES void dot4(const float* x, std::int64_t k, const float* wc, float* s) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  const float *x0 = x, *x1 = x + k, *x2 = x + 2 * k, *x3 = x + 3 * k;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
  for (std::int64_t i = 0; i < k; ++i) {
    const float wi = wc[i];
    s0 += x0[i] * wi;
    s1 += x1[i] * wi;
    s2 += x2[i] * wi;
    s3 += x3[i] * wi;
  }
  s[0] = s0;
  s[1] = s1;
  s[2] = s2;
  s[3] = s3;
}

EMBER_CLONES float dot1(const float* x, std::int64_t k, const float* wc) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t i = 0; i < k; ++i) s += x[i] * wc[i];
  return s;
}

}  // namespace

void gemm_f32(const float* x, const float* w, std::int64_t m, std::int64_t n, std::int64_t k, float* y, bool accumulate,
              int threads) {
  // Columns split over the threads; each thread's weight rows stay in its cache for every row.
#pragma omp parallel for num_threads(std::max(1, threads)) schedule(static)
  for (std::int64_t c = 0; c < n; ++c) {
    const float* wc = w + c * k;
    std::int64_t r = 0;
    for (; r + 4 <= m; r += 4) {
      float s[4];
      dot4(x + r * k, k, wc, s);
      for (int i = 0; i < 4; ++i) {
        float& out = y[(r + i) * n + c];
        out = accumulate ? out + s[i] : s[i];
      }
    }
    for (; r < m; ++r) {
      const float s = dot1(x + r * k, k, wc);
      float& out = y[r * n + c];
      out = accumulate ? out + s : s;
    }
  }
}

}  // namespace ember::kernels::cpu
