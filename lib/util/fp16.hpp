// IEEE half and bfloat16 <-> float conversions, portable scalar code (the hot loops that need
// vector conversions do them in kernels/cpu with F16C/AVX-512 intrinsics).
#pragma once

#include <cstdint>
#include <cstring>

namespace ember {

inline float bits_to_float(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline std::uint32_t float_to_bits(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

inline float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // zero or subnormal: value = mant * 2^-24
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_to_float(sign | 0x7f800000u | (mant << 13));  // inf / nan
  return bits_to_float(sign | ((exp + 112) << 23) | (mant << 13));
}

// Round to nearest even, overflow to infinity, NaN preserved.
inline std::uint16_t float_to_fp16(float f) {
  const std::uint32_t x = float_to_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // nan
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {
    // subnormal or zero in half: round(abs_value * 2^24)
    const float v = bits_to_float(abs) * 16777216.0f;
    const float r = v + 12582912.0f - 12582912.0f;  // round-to-nearest-even of a value < 2^23
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(r));
  }
  const std::uint32_t rounded = abs + 0x0fffu + ((abs >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

inline float bf16_to_float(std::uint16_t b) { return bits_to_float(static_cast<std::uint32_t>(b) << 16); }

inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t x = float_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // nan
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

}  // namespace ember
