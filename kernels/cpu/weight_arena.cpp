#include "kernels/cpu/weight_arena.hpp"

#include "util/check.hpp"

#include <sys/mman.h>

namespace ember::kernels::cpu {

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
// Chunks are this large unless one block needs more: a few chunks for a model of this size, and
// at most one partly used (its untouched pages are never backed by memory).
constexpr std::size_t kChunkBytes = std::size_t{32} << 20;
constexpr std::size_t kAlign = 64;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

WeightArena::~WeightArena() {
  for (const Chunk& c : chunks_) munmap(c.begin, c.size);
}

std::int8_t* WeightArena::allocate(std::size_t bytes) {
  bytes = round_up(bytes == 0 ? 1 : bytes, kAlign);
  if (chunks_.empty() || chunks_.back().size - chunks_.back().used < bytes) {
    const std::size_t size = round_up(bytes > kChunkBytes ? bytes : kChunkBytes, kHugePage);
    // Anonymous pages come zeroed. One huge page of slack lets the chunk start on a huge page
    // boundary, which transparent huge pages need; the slack on either side is unmapped again.
    const std::size_t mapped = size + kHugePage;
    void* mapping = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping == MAP_FAILED)
      fail(ErrorCode::out_of_memory, "cannot map {} bytes for decode weights", mapped);
    auto* first = static_cast<std::int8_t*>(mapping);
    auto* begin = reinterpret_cast<std::int8_t*>(round_up(reinterpret_cast<std::uintptr_t>(first), kHugePage));
    if (begin > first) munmap(first, static_cast<std::size_t>(begin - first));
    if (first + mapped > begin + size) munmap(begin + size, static_cast<std::size_t>(first + mapped - (begin + size)));
#ifdef MADV_HUGEPAGE
    madvise(begin, size, MADV_HUGEPAGE);  // advice: 4 KiB pages where it is not taken
#endif
    chunks_.push_back({begin, size, 0});
  }
  Chunk& c = chunks_.back();
  std::int8_t* p = c.begin + c.used;
  c.used += bytes;
  return p;
}

}  // namespace ember::kernels::cpu
