// Row loops that go parallel only when they are large enough.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>

namespace ember::kernels::cpu {

// fn(r) for every r in [0, rows): on `threads` OpenMP threads when `parallel` (and threads > 1),
// otherwise in a plain loop on the calling thread. The serial case does not enter OpenMP at
// all: `#pragma omp parallel if (false)` still builds a team of one thread, and a decode step
// calls the small kernels hundreds of times (docs/benchmarks.md#serial-loops).
template <class Fn>
void for_rows(std::int64_t rows, int threads, bool parallel, Fn&& fn) {
  if (!parallel || threads <= 1) {
    for (std::int64_t r = 0; r < rows; ++r) fn(r);
    return;
  }
#pragma omp parallel for num_threads(threads)
  for (std::int64_t r = 0; r < rows; ++r) fn(r);
}

// The most threads for_tiles uses: past this, the bandwidth-bound kernels that call it gain
// nothing.
constexpr int kMaxTileTeam = 64;

// Tiles a thread claims at once from its own range while more than kClaimTail tiles of it are
// left. Each claim is a locked instruction, a full barrier the next tile's loads wait behind:
// claimed one at a time, decode's small tiles spent a visible part of the step on them
// (docs/benchmarks.md#decode-stream-s25). Near the end tiles go one at a time, so that the
// threads still finish together.
constexpr std::int64_t kTileClaim = 4;
constexpr std::int64_t kClaimTail = 4 * kTileClaim;

// fn(t, next) for every tile t in [0, tiles) on `team` OpenMP threads (at most kMaxTileTeam;
// one: the calling thread alone), where next is the tile the thread likely takes after t (the
// next of the range t is in) or -1 at the range's end: a kernel that prefetches ahead goes on
// into it. Each thread streams its own contiguous range of tiles (what the hardware prefetcher
// wants), claiming them from the range's cursor (kTileClaim at a time, one at a time near the
// range's end); a thread that is done takes the remaining tiles of the others' ranges one at a
// time. On a shared VM one core is often slowed for a while, and equal fixed halves left the
// other waiting for part of each call (docs/benchmarks.md#comment-figures-s40). Callers make a
// tile's result independent of the thread that computes it.
template <class Fn>
void for_tiles(std::int64_t tiles, int team, Fn&& fn) {
  team = static_cast<int>(
      std::clamp<std::int64_t>(std::min<std::int64_t>(team, kMaxTileTeam), 1, std::max<std::int64_t>(tiles, 1)));
  if (team == 1) {
    for (std::int64_t t = 0; t < tiles; ++t) fn(t, t + 1 < tiles ? t + 1 : -1);
    return;
  }
  // Each cursor has its own cache line: threads claiming tiles from neighbouring cursors in one
  // line made every claim a cache-line transfer between cores (GEMV-only decode step on the
  // default model's shapes: 86 % of the read loop's bandwidth, 93 % with a line each).
  struct alignas(64) Cursor {
    std::int64_t next;  // the range's next tile, read and claimed through std::atomic_ref
  };
  // On the stack, no allocation per call, and left uninitialised past the team's ranges: an
  // array of std::atomic (zeroed on construction) cleared all kMaxTileTeam lines, 4 KiB, on each
  // of a decode step's hundred-odd calls.
  std::array<Cursor, kMaxTileTeam> cursor;
  for (int p = 0; p < team; ++p) cursor[static_cast<std::size_t>(p)].next = tiles * p / team;
#pragma omp parallel num_threads(team)
  {
    // Ranges are counted in `team` parts even if the runtime gave fewer threads: every range
    // is still drained.
    const int t = omp_get_thread_num();
    for (int k = 0; k < team; ++k) {
      const int range = (t + k) % team;
      const std::atomic_ref<std::int64_t> next(cursor[static_cast<std::size_t>(range)].next);
      const std::int64_t end = tiles * (range + 1) / team;
      for (;;) {
        const std::int64_t claim = k == 0 && end - next.load(std::memory_order_relaxed) > kClaimTail ? kTileClaim : 1;
        const std::int64_t first = next.fetch_add(claim, std::memory_order_relaxed);
        if (first >= end) break;
        for (std::int64_t i = first; i < std::min(first + claim, end); ++i) fn(i, i + 1 < end ? i + 1 : -1);
      }
    }
  }
}

}  // namespace ember::kernels::cpu
