// Overflow-checked unsigned arithmetic for sizes and offsets read from model files: every
// result is std::nullopt instead of a silent wrap-around.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

namespace ember::model {

inline std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) {
  if (a > std::numeric_limits<std::uint64_t>::max() - b) return std::nullopt;
  return a + b;
}

inline std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::nullopt;
  return a * b;
}

inline bool is_power_of_two(std::uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Rounds `v` up to a multiple of `alignment` (a power of two).
inline std::optional<std::uint64_t> checked_align_up(std::uint64_t v, std::uint64_t alignment) {
  auto sum = checked_add(v, alignment - 1);
  if (!sum) return std::nullopt;
  return *sum & ~(alignment - 1);
}

}  // namespace ember::model
