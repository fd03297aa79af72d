#include "kernels/cpu/weight_arena.hpp"

#include "kernels/cpu/cpu_tier.hpp"
#include "util/check.hpp"
#include "util/platform.hpp"

namespace ember::kernels::cpu {

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
// Chunks are this large unless one block needs more: a few chunks for a model of this size, and
// at most one partly used (its untouched pages are never backed by memory).
constexpr std::size_t kChunkBytes = std::size_t{32} << 20;
constexpr std::size_t kAlign = 64;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

WeightArena::WeightArena() : WeightArena(cpu_last_level_cache_bytes()) {}

WeightArena::~WeightArena() {
  for (const Chunk& c : chunks_) platform::free_pages(c.begin, c.size);
}

std::int8_t* WeightArena::allocate(std::size_t bytes) {
  bytes = round_up(bytes == 0 ? 1 : bytes, kAlign);
  const std::lock_guard lock(mutex_);
  if (chunks_.empty() || chunks_.back().size - chunks_.back().used < bytes) {
    const std::size_t size = round_up(bytes > kChunkBytes ? bytes : kChunkBytes, kHugePage);
    // Zeroed pages starting on a huge page boundary, which transparent huge pages need.
    auto* begin = static_cast<std::int8_t*>(platform::allocate_pages(size, kHugePage));
    chunks_.push_back({begin, size, 0});
  }
  Chunk& c = chunks_.back();
  std::int8_t* p = c.begin + c.used;
  c.used += bytes;
  allocated_.fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
  return p;
}

GroupedPrefetch grouped_prefetch(bool from_memory) {
  static const bool amd_above_avx2 = cpu_vendor_amd() && active_tier() != CpuTier::avx2;
  return {amd_above_avx2 ? 0 : kWeightPrefetchAhead, from_memory};
}

}  // namespace ember::kernels::cpu
