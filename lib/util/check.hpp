// Checks: every recoverable failure becomes an ember::Error with a formatted message, and sizes
// and offsets read from files are computed with overflow-checked arithmetic (std::nullopt
// instead of a silent wrap-around).
#pragma once

#include <fmt/format.h>
#include <ember/ember.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

namespace ember {

template <class... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

// Internal invariant (a bug if it fails): still an exception, never an abort, because ember
// runs inside someone else's process.
#define EMBER_ASSERT(cond)                                                                                         \
  do {                                                                                                             \
    if (!(cond))                                                                                                   \
      ::ember::fail(::ember::ErrorCode::internal, "internal check failed: {} ({}:{})", #cond, __FILE__, __LINE__); \
  } while (0)

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

}  // namespace ember
