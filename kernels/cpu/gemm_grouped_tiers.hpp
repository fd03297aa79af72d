// The grouped kernel's instruction-set tiers (see gemm_grouped.hpp for the layout and the
// arithmetic). Each tier multiplies one tile of GroupedWeights with every term row of the
// activations; gemm_grouped picks one tier from active_tier() and shares the tiles out.
//
// Plain data only: the SIMD tiers are compiled with their own -m flags
// (kernels/cpu/arch/x86/ and arch/arm/gemm_grouped_<tier>.cpp), and an inline function they instantiated
// (a member of GroupedWeights, std::vector::data) could be the copy the linker keeps for every
// caller, AVX-512 code on a CPU without it.
//
// Every tier performs the same float operations on each output in the same order, which makes
// the tiers bit-identical (the INT8 products are exact integers on every tier):
//   per activation row, for each group g in input order, with acc the group's INT32 dot product
//   and sum the sum of its activations (with two terms, a 16-bit activation's two INT8 planes:
//   acc = 256 acc_hi + acc_lo, sum = 256 sum_hi + sum_lo, and scale the low plane's),
//     with offsets:    v = float(acc) * d;  v = fma(o, float(sum), v)
//     without:         v = float(acc - bias * sum) * d
//     s = fma(v, scale, s)                       (s starts at +0)
//   then y = s, and y = y_old + y when accumulating.
#pragma once

#include "kernels/cpu/quantize.hpp"  // kLowTermBits, kLowTermSteps: declarations and constants only

#include <cstdint>

namespace ember::kernels::cpu::grouped {

// One tile against term rows [0, term_rows).
struct TileJob {
  const std::uint8_t* weights = nullptr;  // the tile's spans, GroupedWeights::tile(t)
  std::int64_t spans = 0;                 // spans of 64 inputs
  std::int64_t record_bytes = 0;          // one block's bytes per span
  int blocks = 1;                         // blocks of 16 outputs in the tile: 1 or 2
  int bits = 4;                           // 4 or 8
  bool offsets = false;                   // each group has its own offset
  bool accumulate = false;                // y = y_old + product
  int terms = 1;                          // INT8 terms per activation row: 1 or 2
  // Bytes ahead of a tile's first pass to prefetch; 0: none. Decode's few-row kernels (tile_rows and its kin) do too
  // little work a byte to hide the memory's latency behind the multiplies, so every x86 tier asks
  // for the weights into L2 (prefetcht1) at twice this lead (or, with prefetch_into_l1, into L1
  // at half of it: see there), which read faster than prefetcht0 at
  // this lead on Zen 4's AVX2 tier and on an Intel Xeon at the AVX-VNNI, AVX-512 and AMX tiers
  // (docs/benchmarks.md#x86-tiers-session22 and #x86-prefetch-s24). The AVX-512 kernel asks for
  // a span's lines in one burst at its start. The 256-bit kernels (avx2, avx_vnni) ask for each
  // line right after the load of the line whole spans behind it: their burst stalled retirement
  // on the Xeon (a profile's samples piled up on the prefetches, the multiplies behind them
  // waiting), and spread out the same prefetches streamed faster (#avx2-prefetch-s28); with
  // prefetch_into_l1 they ask for L1 instead, at half this lead. The many-rows panels use
  // prefetcht0 at this lead.
  std::int64_t prefetch_ahead = 0;
  // Whether the 256-bit kernels' spread-out prefetch asks for each line into L1 (prefetcht0)
  // half prefetch_ahead ahead, rather than into L2 twice it ahead: grouped_prefetch() says
  // when and why.
  bool prefetch_into_l1 = false;
  // Where the prefetch goes on past the tile's end: the weights of the tile this thread takes
  // next, which in a batch of products (the experts of a routed layer) lie elsewhere; null at
  // the end of the thread's range, where the prefetch stops. Past that end lie tiles another
  // thread streams (its own range, or the next product, which the first thread starts): lines
  // this core prefetched into its L2 then reach the other core from here, slower than from
  // memory (likely: stopping there, not the continuation itself, is what sped up dense decode
  // in docs/benchmarks.md#decode-stream-s25). Read by decode's few-row kernels; the many-rows panels,
  // whose arithmetic hides the memory, prefetch the bytes after the tile whatever they are.
  const std::uint8_t* next_weights = nullptr;
  const std::int8_t* q = nullptr;      // [term_rows][q_stride]
  const float* scales = nullptr;       // [term_rows][groups]
  const std::int32_t* sums = nullptr;  // [term_rows][groups]
  const std::int16_t* wide = nullptr;  // terms 2: [term_rows / 2][q_stride] (GroupedActivations::wide)
  // GroupedActivations::sums_by_group and scales_by_group from the job's first row: group g's
  // value of activation row r at [g * by_group_stride + r].
  const std::int32_t* sums_by_group = nullptr;
  const float* scales_by_group = nullptr;
  std::int64_t by_group_stride = 0;
  // q_stride: GroupedActivations::q_stride(), bytes from one term row of q to the next.
  std::int64_t q_stride = 0, groups = 0, term_rows = 0;
  float* y = nullptr;             // [term_rows / terms][out]
  std::int64_t out = 0;           // y's row length
  std::int64_t first_output = 0;  // the tile's first output
};

using TileFn = void (*)(const TileJob& job);

// Term rows per call of the x86 tiers' few-row kernels (decode's: tile_rows and its kin), which
// keep that many rows' sums in registers; gemm_grouped splits the work between threads by it.
constexpr int kTileRows = 4;

// One row's activations, `groups` groups of 32 (kWeightGroup) values, each quantized as
// quantize_rows_s8 quantizes a row: q (32 bytes a group), and per group its scale and the sum of
// its q. Every tier gives the portable form's bytes, scales and sums.
using QuantizeGroupsFn = void (*)(const float* x, std::int64_t groups, std::int8_t* q, float* scales,
                                  std::int32_t* sums);

// The portable reference of the others (kernels/cpu/gemm_grouped_scalar.cpp).
void tile_scalar(const TileJob& job);
void quantize_groups_scalar(const float* x, std::int64_t groups, std::int8_t* q, float* scales, std::int32_t* sums);
// sums[g] = the sum of q's group g (32 values), g < groups: the portable quantizer's sums, and
// the two-term quantizer's.
void sum_groups(const std::int8_t* q, std::int64_t groups, std::int32_t* sums);
#if defined(__x86_64__) || defined(_M_X64)
void quantize_groups_avx2(const float* x, std::int64_t groups, std::int8_t* q, float* scales, std::int32_t* sums);
void tile_avx2(const TileJob& job);           // vpmaddubsw + vpmaddwd
void tile_avx_vnni(const TileJob& job);       // 256-bit vpdpbusd, VEX (AVX-VNNI)
void tile_avx_vnni_evex(const TileJob& job);  // the same, EVEX (AVX512-VL VNNI: AMD Zen 4)
void tile_avx512_vnni(const TileJob& job);    // 512-bit vpdpbusd
#endif
#if defined(__aarch64__) || defined(_M_ARM64)
void tile_neon(const TileJob& job);     // smull + sadalp
void tile_dotprod(const TileJob& job);  // sdot
#endif

}  // namespace ember::kernels::cpu::grouped
