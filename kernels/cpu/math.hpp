// Float helpers: branch-free ones written so that a loop calling them vectorises (no libm
// calls), and the one fused multiply-add of every scalar kernel.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace ember::kernels::cpu {

// e^x with a relative error below 2e-7 on [-87, 88] (Cephes' expf polynomial after the usual
// x = n*ln2 + r reduction). Inputs are clamped, so exp_approx(-inf-ish) is ~1e-38, never NaN:
// softmax and SiLU only need that. std::exp does not vectorise without -ffast-math, and
// SiLU/softmax over a 512-token prefill call it tens of millions of times.
inline float exp_approx(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // Round x*log2(e) to the nearest integer with the 1.5*2^23 trick (vectorises, unlike lrint).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  return y * std::bit_cast<float>(bits);
}

// The float sum of term(i) over [0, n) in one order whatever the vector width: 16 interleaved
// partial sums (lane l takes i = l, l + 16, ... in index order; the tail goes to lanes 0, 1, ...),
// then lanes l and l + w added for w = 8, 4, 2, 1. `#pragma omp simd reduction(+)` would let
// each target_clones copy split the sum by its own register width, and an AVX2 machine would
// normalise a row differently from an AVX-512 one; this order is fixed by the code, so every
// copy (and every CPU) gives the same bits. Its files are built with -ffp-contract=off, so that
// no copy fuses a product into the add either.
template <class Term>
inline float fixed_order_sum(std::int64_t n, Term&& term) {
  constexpr int kLanes = 16;
  float lane[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += term(i + l);
  for (int l = 0; i < n; ++i, ++l) lane[l] += term(i);
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) lane[l] += lane[l + w];
  return lane[0];
}

// a * b + c rounded once, computed through double: the product of two floats is exact in
// double, the sum is rounded to odd there (the last bit records whether it was exact), and a
// double rounded to odd, with 53 >= 24 + 2 bits, rounds to the nearest float correctly.
inline float fma_through_double(float a, float b, float c) {
  const double p = static_cast<double>(a) * static_cast<double>(b);
  const double z = static_cast<double>(c);
  double s = p + z;
  const double bz = s - p;
  const double error = (p - (s - bz)) + (z - bz);  // p + z - s exactly (TwoSum)
  if (error != 0.0 && std::isfinite(s)) {
    auto bits = std::bit_cast<std::uint64_t>(s);
    if ((bits & 1u) == 0) {  // the odd neighbour lies towards the exact sum
      bits = (error > 0.0) == (s > 0.0) ? bits + 1 : bits - 1;
      s = std::bit_cast<double>(bits);
    }
  }
  return static_cast<float>(s);
}

// a * b + c rounded once, as the SIMD tiers' FMA instructions compute it: the scalar tiers'
// fused multiply-add. MinGW-w64's fmaf (what std::fma on float calls without FMA in the baseline
// ISA) is not fused: it rounds the product first, so its scalar tier would differ from the
// others (docs/benchmarks.md#mingw-fmaf). Other C libraries round fmaf correctly.
inline float fused_multiply_add(float a, float b, float c) {
#if defined(__MINGW32__) && !defined(__FMA__)
  return fma_through_double(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

}  // namespace ember::kernels::cpu
