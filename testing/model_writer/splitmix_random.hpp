// splitmix64: a tiny seeded generator whose output is the same on every platform, for the
// synthetic model and adapter writers (their files, and the goldens made from them, depend on
// these exact values).
#pragma once

#include <cstdint>
#include <vector>

namespace ember::model {

class SplitMixRandom {
 public:
  explicit SplitMixRandom(std::uint64_t seed) : state_(seed) {}
  float uniform(float a) {  // in [-a, a)
    state_ += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float unit = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
    return (2.0f * unit - 1.0f) * a;
  }
  std::vector<float> values(std::int64_t n, float a, float center = 0.0f) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = center + uniform(a);
    return v;
  }

 private:
  std::uint64_t state_;
};

}  // namespace ember::model
