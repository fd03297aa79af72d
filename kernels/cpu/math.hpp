// Branch-free float helpers written so that a loop calling them vectorises (no libm calls).
#pragma once

#include <bit>
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

}  // namespace ember::kernels::cpu
