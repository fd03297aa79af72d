// Memory for the weights that decode streams on every step (the GEMV's copies), packed
// together in transparent huge pages where the kernel grants them (madvise mode included).
//
// Why: a decode step reads every weight once, ~135 MB on the default model, and is bound by that
// stream. In 4 KiB pages it crosses a page every 64 cache lines, and each crossing is a TLB miss
// (a two-level walk in a VM) and a restart of the hardware prefetcher, which stops at page
// boundaries: a read loop streams 2 MiB pages measurably faster than 4 KiB ones
// (docs/benchmarks.md#huge-pages). Only lm_head is large enough for huge pages on its own, so all
// the GEMV weights share chunks here.
//
// Thread-safety: allocate() is for building weights, and may be called from several threads at
// once (a mixture-of-experts layer packs its experts in parallel); the memory it returns is
// then read-only and may be read from any thread. Blocks live as long as the arena.
// outgrows_cache() may be called from any thread at any time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace ember::kernels::cpu {

// How far ahead of what they multiply the streaming kernels (the GEMV, the grouped kernel)
// prefetch a weight tile on its first pass. Huge pages are advice, not a promise: where the
// kernel gives 4 KiB pages the hardware prefetcher stops at each of them. A few KiB of lead
// helped a decode step on an Intel Xeon; much more helped no more (docs/benchmarks.md#weight-prefetch).
constexpr std::int64_t kWeightPrefetchAhead = 4096;

// How the grouped kernel prefetches a product's weights (TileJob::prefetch_ahead and
// prefetch_into_l1), decided here for every tier and vendor; `from_memory`:
// GroupedWeights::streamed_from_memory().
//  * ahead, in bytes (0: no software prefetch): kWeightPrefetchAhead, except on AMD CPUs above
//    the AVX2 tier, where the prefetches slowed decode's weight stream on Zen 4 at every model
//    size measured (docs/benchmarks.md#moe-decode-prefetch). The AVX2 tier's kernel, slower per
//    byte, gained from its L2 prefetch on the same CPU (#x86-tiers-session22), so it keeps it.
//  * into_l1: decode's 256-bit kernels (avx2, avx_vnni) prefetch into L1 at half the lead rather
//    than into L2 at twice it, for weights that come from memory. On an Intel Xeon that
//    streamed a 1B model, and the experts of a mixture, nearer the memory's bandwidth, while a
//    model its L3 holds decoded slower with it (#decode-prefetch-s29); on an AVX2-only Zen 3 the
//    1B decoded faster with it too, once the one-row loop read its lines in address order
//    (#zen3-prefetch-s41; session 30 had found no gain with the old loop).
struct GroupedPrefetch {
  std::int64_t ahead = 0;
  bool into_l1 = false;
};
GroupedPrefetch grouped_prefetch(bool from_memory);

class WeightArena {
 public:
  // Weighed against the CPU's last-level cache (cpu_last_level_cache_bytes()).
  WeightArena();
  // Weighed against a cache of cache_bytes (tests).
  explicit WeightArena(std::int64_t cache_bytes) : cache_bytes_(cache_bytes) {}
  WeightArena(const WeightArena&) = delete;
  WeightArena& operator=(const WeightArena&) = delete;
  ~WeightArena();

  // `bytes` of zeroed memory, 64-byte aligned. Throws ErrorCode::out_of_memory.
  std::int8_t* allocate(std::size_t bytes);

  // Whether the arena holds more bytes than the last-level cache. A dense model's decode step
  // reads every weight once, in the same order each step, so a set larger than the cache leaves
  // none of its lines there for the next step, which streams them all from memory; a smaller one
  // is read from the cache. A mixture's step reads a few experts of many, which a cache smaller
  // than them all does not keep either. The grouped kernel's decode prefetch differs between the
  // two (grouped_prefetch()). False when the cache's size is unknown (0).
  bool outgrows_cache() const { return cache_bytes_ > 0 && allocated_.load(std::memory_order_relaxed) > cache_bytes_; }

 private:
  struct Chunk {
    std::int8_t* begin;  // 2 MiB aligned; the whole mapping
    std::size_t size;
    std::size_t used;
  };
  const std::int64_t cache_bytes_;
  std::atomic<std::int64_t> allocated_{0};  // bytes handed out by allocate()
  std::mutex mutex_;                        // guards chunks_
  std::vector<Chunk> chunks_;
};

}  // namespace ember::kernels::cpu
