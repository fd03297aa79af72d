#include "kernels/cpu/quantize.hpp"

#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/simd.hpp"
#include "util/check.hpp"

#include <cmath>

namespace ember::kernels::cpu {

namespace {

// `a > m ? a : m`, not std::fmax: the latter is a libm call per element that stops the loop
// from vectorising (it was a visible part of a prefill: docs/benchmarks.md#comment-figures-s40).
// NaN is skipped the same way.
EMBER_CLONES float max_abs(const float* x, std::int64_t n) {
  float m = 0.0f;
#pragma omp simd reduction(max : m)
  for (std::int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    m = a > m ? a : m;
  }
  return m;
}

// Rounds with the 1.5*2^23 trick (ties to even, like nearbyint) so the loop vectorises; valid
// because |x * inv| <= 127 after the scale. The clamp is written so that a NaN (an element that
// is NaN in a row whose maximum is finite) becomes -qmax, as vmaxps then vminps make it in the
// SIMD quantizers, rather than reaching the cast.
EMBER_CLONES void quantize_row(const float* x, std::int64_t n, float inv, float qmax, std::int8_t* q) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    float v = (x[i] * inv + 12582912.0f) - 12582912.0f;
    v = -qmax < v ? v : -qmax;
    v = v < qmax ? v : qmax;
    q[i] = static_cast<std::int8_t>(v);
  }
}

void quantize_one(const float* x, std::int64_t n, float qmax, std::int8_t* q, float* scale) {
  const float m = max_abs(x, n);
  if (!(m > 0.0f) || !std::isfinite(m) || !std::isfinite(qmax / m)) {
    // All zero, a maximum so small that its reciprocal overflows (below ~4e-37: zero in effect),
    // or non-finite garbage, which would poison every output anyway: scale 0.
    for (std::int64_t i = 0; i < n; ++i) q[i] = 0;
    *scale = 0.0f;
    return;
  }
  *scale = m / qmax;
  quantize_row(x, n, qmax / m, qmax, q);
}

// The rounding error of x ~= q_hi * s_hi in steps of s_hi / 256 (quantize_rows_s8_residual).
EMBER_CLONES void quantize_error_row(const float* x, const std::int8_t* q_hi, float s_hi, std::int64_t n, float inv,
                                     std::int8_t* q) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    float v = ((x[i] - static_cast<float>(q_hi[i]) * s_hi) * inv + 12582912.0f) - 12582912.0f;
    v = v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v);
    q[i] = static_cast<std::int8_t>(v);
  }
}

void quantize_error(const float* x, std::int64_t n, const std::int8_t* q_hi, float s_hi, std::int8_t* q, float* scale) {
  if (!(s_hi > 0.0f)) {
    for (std::int64_t i = 0; i < n; ++i) q[i] = 0;
    *scale = 0.0f;
    return;
  }
  constexpr auto steps = static_cast<float>(kLowTermSteps);
  *scale = s_hi / steps;  // exact: a power of two
  quantize_error_row(x, q_hi, s_hi, n, steps / s_hi, q);
}

void check_shape(std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  if (rows < 0 || cols < 0 || ld < cols)
    fail(ErrorCode::invalid_argument, "quantize: bad shape rows={} cols={} ld={}", rows, cols, ld);
}

void quantize_rows(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ldx, float qmax, std::int8_t* q,
                   float* scales, int threads) {
  check_shape(rows, cols, ldx);
  for_rows(rows, threads, rows * cols >= kQuantizeParallelElements,
           [&](std::int64_t r) { quantize_one(x + r * ldx, cols, qmax, q + r * cols, scales + r); });
}

}  // namespace

void quantize_rows_s8(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ldx, std::int8_t* q,
                      float* scales, int threads) {
  quantize_rows(x, rows, cols, ldx, 127.0f, q, scales, threads);
}

void quantize_rows_s8_residual(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ldx,
                               std::int8_t* q_hi, float* s_hi, std::int8_t* q_lo, float* s_lo, int threads) {
  check_shape(rows, cols, ldx);
  for_rows(rows, threads, rows * cols >= kQuantizeParallelElements, [&](std::int64_t r) {
    quantize_one(x + r * ldx, cols, 127.0f, q_hi + r * cols, s_hi + r);
    quantize_error(x + r * ldx, cols, q_hi + r * cols, s_hi[r], q_lo + r * cols, s_lo + r);
  });
}

void quantize_weights_s8(const float* w, std::int64_t out, std::int64_t in, std::int8_t* q, float* scales, int threads,
                         int qmax) {
  if (qmax < 1 || qmax > 127) fail(ErrorCode::invalid_argument, "quantize: qmax={} not in [1, 127]", qmax);
  quantize_rows(w, out, in, in, static_cast<float>(qmax), q, scales, threads);
}

}  // namespace ember::kernels::cpu
