#include "runtime/speculation.hpp"

#include <algorithm>

namespace ember::runtime {

std::vector<std::int32_t> propose_by_lookup(std::span<const std::int32_t> tokens, int max_tokens) {
  const auto size = static_cast<std::ptrdiff_t>(tokens.size());
  if (max_tokens <= 0) return {};
  for (std::ptrdiff_t n = kLookupMaxNgram; n >= kLookupMinNgram; --n) {
    if (size <= n) continue;
    const auto suffix = tokens.subspan(static_cast<std::size_t>(size - n));
    // Latest first: in a copy under way the latest match is the passage being copied. A match
    // ends before the suffix starts, so at least one token follows it.
    for (std::ptrdiff_t at = size - n - 1; at >= 0; --at) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + at)) continue;
      const std::ptrdiff_t from = at + n;
      const std::ptrdiff_t count = std::min<std::ptrdiff_t>(max_tokens, size - from);
      return {tokens.begin() + from, tokens.begin() + from + count};
    }
  }
  return {};
}

}  // namespace ember::runtime
