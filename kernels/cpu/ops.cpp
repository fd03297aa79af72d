#include "kernels/cpu/ops.hpp"

#include "kernels/cpu/math.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/simd.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ember::kernels::cpu {

namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr std::int64_t kParallelElements = 32768;

EMBER_CLONES float sum_squares(const float* x, std::int64_t n) {
  return fixed_order_sum(n, [x](std::int64_t i) { return x[i] * x[i]; });
}

EMBER_CLONES void scale_by(const float* x, const float* w, float k, std::int64_t n, float* out) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) out[i] = x[i] * k * w[i];
}

// out[i] = x[i] / (1 + e^t(x[i])), times u[i] when kTimesU. The exponentials go into a chunk
// of their own first: in one loop GCC's partial-redundancy elimination gives each clamped arm of
// exp_approx its own division and the vectorised loop computes every arm for every lane, and the
// upper clamp's arm, x / (1 + e^88), makes a denormal of nearly every x, a microcode assist each
// (docs/benchmarks.md#silu-denormals-s33). The same operations in the same order: the same bits.
// Always inlined, so that each EMBER_CLONES caller compiles it at its own vector width.
constexpr std::int64_t kExpChunk = 256;

template <bool kTimesU, class Exponent>
[[gnu::always_inline]] inline void x_over_one_plus_exp(const float* x, const float* u, std::int64_t n, float* out,
                                                       Exponent t) {
  float e[kExpChunk];
  for (std::int64_t at = 0; at < n; at += kExpChunk) {
    const std::int64_t m = std::min(kExpChunk, n - at);
    const float* xa = x + at;
#pragma omp simd
    for (std::int64_t i = 0; i < m; ++i) e[i] = exp_approx(t(xa[i]));
#pragma omp simd
    for (std::int64_t i = 0; i < m; ++i) {
      const float v = xa[i] / (1.0f + e[i]);
      out[at + i] = kTimesU ? v * u[at + i] : v;
    }
  }
}

EMBER_CLONES void silu_mul_row(const float* g, const float* u, std::int64_t n, float* out) {
  x_over_one_plus_exp<true>(g, u, n, out, [](float x) { return -x; });
}

// gelu's tanh approximation, 0.5 x (1 + tanh(y)) with y = sqrt(2/pi) (x + 0.044715 x^3),
// computed as x / (1 + e^(-2y)) (the same value): no cancellation in 1 + tanh(y) for negative x.
constexpr auto gelu_exponent = [](float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return -2.0f * (kSqrt2OverPi * (x + 0.044715f * x * x * x));
};

EMBER_CLONES void gelu_mul_row(const float* g, const float* u, std::int64_t n, float* out) {
  x_over_one_plus_exp<true>(g, u, n, out, gelu_exponent);
}

EMBER_CLONES void gelu_row(const float* g, std::int64_t n, float* out) {
  x_over_one_plus_exp<false>(g, nullptr, n, out, gelu_exponent);
}

// Two passes, as ggml_norm: the mean, then the variance of the centred values.
void layer_norm_row(const float* x, const float* w, const float* b, std::int64_t n, float eps, float* out) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += x[i];
  const auto mean = static_cast<float>(sum / static_cast<double>(n));
  double var = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float c = x[i] - mean;
    var += static_cast<double>(c) * c;
  }
  const float k = 1.0f / std::sqrt(static_cast<float>(var / static_cast<double>(n)) + eps);
  for (std::int64_t i = 0; i < n; ++i) out[i] = (x[i] - mean) * k * w[i] + b[i];
}

// Rotates one row (all heads) with precomputed cos/sin of its position.
void rope_row(float* x, int heads, int head_dim, int half_dims, const float* cs, const float* sn, RopeLayout layout) {
  for (int h = 0; h < heads; ++h) {
    float* v = x + static_cast<std::int64_t>(h) * head_dim;
    for (int i = 0; i < half_dims; ++i) {
      const int a = layout == RopeLayout::interleaved ? 2 * i : i;
      const int b = layout == RopeLayout::interleaved ? 2 * i + 1 : i + half_dims;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * cs[i] - x1 * sn[i];
      v[b] = x0 * sn[i] + x1 * cs[i];
    }
  }
}

// out = x / sqrt(mean(x^2) + eps) * w over n values; out may alias x.
void rmsnorm_row(const float* x, const float* w, std::int64_t n, float eps, float* out) {
  const float mean = sum_squares(x, n) / static_cast<float>(n);
  scale_by(x, w, 1.0f / std::sqrt(mean + eps), n, out);
}

}  // namespace

void rmsnorm(const float* x, const float* weight, std::int64_t rows, std::int64_t cols, float eps, float* out,
             int threads) {
  if (rows < 0 || cols <= 0) fail(ErrorCode::invalid_argument, "rmsnorm: bad shape rows={} cols={}", rows, cols);
  for_rows(rows, threads, rows * cols >= kParallelElements,
           [&](std::int64_t r) { rmsnorm_row(x + r * cols, weight, cols, eps, out + r * cols); });
}

void rmsnorm_heads(float* x, std::int64_t rows, std::int64_t ld, int heads, int head_dim, const float* weight,
                   float eps, int threads) {
  if (rows < 0 || heads <= 0 || head_dim <= 0 || ld < std::int64_t{heads} * head_dim)
    fail(ErrorCode::invalid_argument, "rmsnorm_heads: bad shape rows={} ld={} heads={} head_dim={}", rows, ld, heads,
         head_dim);
  for_rows(rows, threads, rows * heads * head_dim >= kParallelElements, [&](std::int64_t r) {
    for (int h = 0; h < heads; ++h) {
      float* v = x + r * ld + std::int64_t{h} * head_dim;
      rmsnorm_row(v, weight, head_dim, eps, v);
    }
  });
}

RopeAngles rope_angles(const std::int32_t* positions, std::int64_t rows, int rope_dims, float base,
                       const float* freq_factors, float position_scale) {
  if (rows < 0 || rope_dims <= 0 || rope_dims % 2 != 0 || !(base > 0.0f) || !(position_scale > 0.0f) ||
      !std::isfinite(position_scale))
    fail(ErrorCode::invalid_argument, "rope: bad arguments rows={} rope_dims={} base={} position_scale={}", rows,
         rope_dims, base, position_scale);
  const int half_dims = rope_dims / 2;
  for (int i = 0; freq_factors != nullptr && i < half_dims; ++i)
    if (!(freq_factors[i] > 0.0f))
      fail(ErrorCode::invalid_argument, "rope: frequency factor {} = {} is not positive", i, freq_factors[i]);
  RopeAngles a;
  a.rows = rows;
  a.rope_dims = rope_dims;
  a.cos.resize(static_cast<std::size_t>(rows * half_dims));
  a.sin.resize(a.cos.size());
  // In double: at position 8191 a float angle would already be off by ~5e-4 rad.
  std::vector<double> inv_freq(static_cast<std::size_t>(half_dims));
  for (int i = 0; i < half_dims; ++i) {
    double f = std::pow(static_cast<double>(base), -2.0 * i / rope_dims);
    if (freq_factors != nullptr) f /= freq_factors[i];
    inv_freq[static_cast<std::size_t>(i)] = f * position_scale;
  }
  for (std::int64_t r = 0; r < rows; ++r)
    for (int i = 0; i < half_dims; ++i) {
      const double theta = positions[r] * inv_freq[static_cast<std::size_t>(i)];
      const auto at = static_cast<std::size_t>(r * half_dims + i);
      a.cos[at] = static_cast<float>(std::cos(theta));
      a.sin[at] = static_cast<float>(std::sin(theta));
    }
  return a;
}

void rope(float* x, std::int64_t rows, std::int64_t ld, int heads, int head_dim, const RopeAngles& angles,
          RopeLayout layout, int threads) {
  const int rope_dims = angles.rope_dims;
  if (rows < 0 || rows != angles.rows || heads <= 0 || head_dim <= 0 || rope_dims <= 0 || rope_dims > head_dim ||
      ld < static_cast<std::int64_t>(heads) * head_dim)
    fail(ErrorCode::invalid_argument,
         "rope: bad arguments rows={} (angles for {}) ld={} heads={} head_dim={} rope_dims={}", rows, angles.rows, ld,
         heads, head_dim, rope_dims);
  const int half_dims = rope_dims / 2;
  for_rows(rows, threads, rows * ld >= kParallelElements, [&](std::int64_t r) {
    rope_row(x + r * ld, heads, head_dim, half_dims, angles.cos.data() + r * half_dims,
             angles.sin.data() + r * half_dims, layout);
  });
}

void rope(float* x, std::int64_t rows, std::int64_t ld, int heads, int head_dim, int rope_dims,
          const std::int32_t* positions, float base, RopeLayout layout, int threads) {
  if (rope_dims > head_dim) fail(ErrorCode::invalid_argument, "rope: rope_dims={} > head_dim={}", rope_dims, head_dim);
  rope(x, rows, ld, heads, head_dim, rope_angles(positions, rows, rope_dims, base), layout, threads);
}

namespace {

// act(gate) * up over rows of [gate(ffn) | up(ffn)], `act_mul_row` one row's worth.
template <class ActMulRow>
void gated_mul(const char* name, const float* gate_up, std::int64_t rows, std::int64_t ffn, float* out, int threads,
               ActMulRow act_mul_row) {
  if (rows < 0 || ffn <= 0) fail(ErrorCode::invalid_argument, "{}: bad shape rows={} ffn={}", name, rows, ffn);
  for_rows(rows, threads, rows * ffn >= kParallelElements, [&](std::int64_t r) {
    const float* g = gate_up + r * 2 * ffn;
    act_mul_row(g, g + ffn, ffn, out + r * ffn);
  });
}

}  // namespace

void gelu_mul(const float* gate_up, std::int64_t rows, std::int64_t ffn, float* out, int threads) {
  gated_mul("gelu_mul", gate_up, rows, ffn, out, threads, gelu_mul_row);
}

void gelu(const float* x, std::int64_t rows, std::int64_t n, float* out, int threads) {
  if (rows < 0 || n <= 0) fail(ErrorCode::invalid_argument, "gelu: bad shape rows={} n={}", rows, n);
  for_rows(rows, threads, rows * n >= kParallelElements, [&](std::int64_t r) { gelu_row(x + r * n, n, out + r * n); });
}

void layer_norm(const float* x, const float* weight, const float* bias, std::int64_t rows, std::int64_t cols, float eps,
                float* out, int threads) {
  if (rows < 0 || cols <= 0) fail(ErrorCode::invalid_argument, "layer_norm: bad shape rows={} cols={}", rows, cols);
  for_rows(rows, threads, rows * cols >= kParallelElements,
           [&](std::int64_t r) { layer_norm_row(x + r * cols, weight, bias, cols, eps, out + r * cols); });
}

void silu_mul(const float* gate_up, std::int64_t rows, std::int64_t ffn, float* out, int threads) {
  gated_mul("silu_mul", gate_up, rows, ffn, out, threads, silu_mul_row);
}

}  // namespace ember::kernels::cpu
