// Helpers shared by the kernel tests: seeded random data and error norms.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace ember::test {

inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// ||a - b||_F / ||b||_F with b the reference.
template <class A, class B>
double relative_error(const A& a, const B& b) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    num += d * d;
    den += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

// Number of elements whose bits differ; reports the first one.
inline std::size_t bit_mismatches(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) == 0) continue;
    if (bad++ == 0) MESSAGE("first mismatch at ", i, ": ", a[i], " vs ", b[i]);
  }
  return bad;
}

}  // namespace ember::test
