// INT8 GEMV for decode: y[m, out] for a few activation rows, streaming the INT8 weights once.
// oneDNN's brgemm streams the weights far below memory bandwidth at m = 1, and generation is
// bound by that stream (docs/benchmarks.md#int8-gemv). On tiers where oneDNN 2.6 has no fast
// INT8 kernel (below avx512_vnni) the same kernel also runs every prefill row: ember's W8A8 GEMM.
//
// One micro-kernel per tier (gemv_int8_tiers.hpp): AVX-512 VNNI and 256-bit vpdpbusd (AVX-VNNI)
// multiply q + 128 and subtract 128 * sum(w); AVX2 uses vpmaddubsw's sign trick; arm64's dotprod
// (sdot) and neon (smull + sadalp) tiers and the scalar reference sum q * w. The INT32 sums are exact on every tier, and so bit-exact with the oneDNN
// path of Int8Linear (linear.cpp), which ember's batch and ISA invariance need: a row's output
// depends neither on its batch nor on the CPU. The epilogue repeats oneDNN's float operations in
// its order, y = (float(acc) * w_scale[n]) * x_scale[i] (+ y_old), with no fused multiply-add.
//
// Thread-safety: GemvWeightsS8 is immutable after construction; gemv_int8 only reads it.
#pragma once

#include "kernels/cpu/cpu_tier.hpp"
#include "kernels/cpu/weight_arena.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace ember::kernels::cpu {

// The most activation rows Int8Linear gives the GEMV where oneDNN has a fast INT8 kernel
// (avx512_vnni and amx). The kernel keeps a few rows x 64 outputs (a tile) of accumulators in
// registers; more rows rerun it on the same tile while its weights are still in L1/L2, so the
// weights are streamed once. Up to 64 rows (a 32-stream decode step with two-term activations)
// it beats oneDNN's brgemm on every model shape; at 128 brgemm wins
// (docs/benchmarks.md#int8-gemv-rows).
constexpr std::int64_t kGemvMaxRows = 64;

// The weights in the GEMV's layout. Output rows are grouped in blocks of 16; for each group of 4
// inputs a block has 64 bytes, row r's 4 weights at bytes 4r..4r+3. That is the operand
// vpdpbusd multiplies against 4 broadcast activation bytes, so one instruction adds 4 products
// to each of 16 outputs and no horizontal sum is needed.
//
// Blocks are taken tile_blocks() at a time (a tile), and the blocks of a tile are interleaved
// group by group ([group][block][64 bytes]): a tile is one sequential stream, and so is a
// thread's range of tiles, the access pattern of a plain read loop: one stream per block reads
// measurably slower (docs/benchmarks.md#int8-gemv-layout). A tile is the unit threads share out,
// so a matrix with few blocks gets narrower tiles: the end of a call waits for at most one tile.
// The 256-bit tiers read a block's 64 bytes as two registers (outputs 0-7, 8-15).
//
// Rows are padded to a multiple of 16 and inputs to a multiple of 4 with zero weights. Weights
// must lie in [-127, 127] (the AVX2 tier's sign trick; ember quantizes to that range).
class GemvWeightsS8 {
 public:
  // q: dense [out, in] INT8 weights (row = output channel); scales[out]: their scales. The
  // packed weights are allocated from `arena` (huge pages), which this object keeps alive.
  GemvWeightsS8(const std::int8_t* q, const float* scales, std::int64_t out, std::int64_t in,
                std::shared_ptr<WeightArena> arena);

  std::int64_t out() const { return out_; }
  std::int64_t in() const { return in_; }
  // Row length of the activations gemv_int8 takes (in rounded up to a multiple of 4).
  std::int64_t padded_in() const { return padded_in_; }
  std::int64_t blocks() const { return (out_ + 15) / 16; }
  // Blocks per tile (1, 2 or 4), and the tiles.
  std::int64_t tile_blocks() const { return tile_blocks_; }
  std::int64_t tiles() const { return (blocks() + tile_blocks_ - 1) / tile_blocks_; }
  // Blocks in tile t: tile_blocks() except perhaps in the last.
  std::int64_t blocks_in(std::int64_t t) const { return std::min(tile_blocks_, blocks() - t * tile_blocks_); }
  // Tile t: [padded_in / 4][blocks_in(t)][16][4] bytes.
  const std::int8_t* tile(std::int64_t t) const { return packed_ + tile_offset(t); }
  const std::int32_t* compensation() const { return compensation_.data(); }
  const float* scales() const { return scales_.data(); }

 private:
  std::int64_t tile_offset(std::int64_t t) const { return t * tile_blocks_ * 16 * padded_in_; }

  std::int64_t out_;
  std::int64_t in_;
  std::int64_t padded_in_;
  std::int64_t tile_blocks_;
  std::shared_ptr<WeightArena> arena_;      // owns packed_
  const std::int8_t* packed_;               // i8 tiles, 64-byte aligned
  std::vector<std::int32_t> compensation_;  // 128 * sum_k q[n][k], padded to blocks * 16
  std::vector<float> scales_;               // weight scales, padded to blocks * 16 with zeros
};

// vpdpbusd multiplies unsigned by signed bytes: activations go in as u8 = q + 128 and the
// kernel subtracts 128 * sum(w_row). q: dense [m, in] from quantize_rows_s8; xu: [m, padded_in].
void gemv_activations(const std::int8_t* q, std::int64_t m, std::int64_t in, std::int64_t padded_in, std::uint8_t* xu);

// y[m, out] (dense) = (float(xu·Wᵀ - compensation) * w_scale[n]) * x_scales[i], or += when
// accumulating, m >= 1, at the active tier. threads: OpenMP threads, output tiles are split
// between them; each thread runs all m rows of a tile before the next.
void gemv_int8(const GemvWeightsS8& w, const std::uint8_t* xu, const float* x_scales, std::int64_t m, float* y,
               bool accumulate, int threads);
// The same for tiles [tile_begin, tile_end) only: y's columns [tile_begin, tile_end) *
// tile_blocks() * 16 (up to out()), its other columns untouched; at `tier`, which must be
// available (tests run every one; the results are the same bit for bit).
void gemv_int8(const GemvWeightsS8& w, const std::uint8_t* xu, const float* x_scales, std::int64_t m, float* y,
               bool accumulate, int threads, std::int64_t tile_begin, std::int64_t tile_end,
               CpuTier tier = active_tier());

}  // namespace ember::kernels::cpu
