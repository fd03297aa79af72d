// INT8 GEMV for decode: y[m, out] for m <= kGemvMaxRows activation rows, streaming the INT8
// weights once with AVX-512 VNNI (vpdpbusd). oneDNN's brgemm reaches ~9 GB/s of weights per
// core at m = 1; generation is bound by that stream, so this path runs at memory bandwidth
// instead: at m = 1 on one core of the dev box (AMD EPYC Zen 4, shared and loaded) 576->49152
// takes 1.4-2.1 ms vs 3.3-4.1 ms, the per-layer shapes 6-25 us (37-70 GB/s, partly from L2/L3)
// vs 14-70 us, and decode (ember-bench tg128, 1 thread) went from 41 to 101 tokens/s.
//
// It is bit-exact with the oneDNN path of Int8Linear (linear.cpp), which ember's batch
// invariance needs: a row's output must not depend on the batch it was computed in. The INT32
// dot products are exact in both, and the epilogue repeats oneDNN's float operations in its
// order, y = (float(acc) * w_scale[n]) * x_scale[i] (+ y_old), with no fused multiply-add.
//
// Thread-safety: GemvWeightsS8 is immutable after construction; gemv_int8 only reads it.
#pragma once

#include "kernels/cpu/weight_arena.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace ember::kernels::cpu {

// The most activation rows one GEMV call takes. The kernel keeps up to 4 rows x 64 outputs (a
// tile) of accumulators in registers; more rows rerun it on the same tile while its weights are
// still in L1/L2, so the weights are streamed once. Up to 64 rows (a 32-stream decode step
// with two-term activations) it beats oneDNN's brgemm on every model shape (gemm_bench, 2
// threads, noisy dev box, M = 32 / 64: 576->960 61-87 / 172 us vs 105 / 205, 576->3072 164 /
// 337 us vs 255 / 436, 576->49152 3.9 / 7.0 ms vs 5.2 / 9.0); at 128 brgemm wins.
constexpr std::int64_t kGemvMaxRows = 64;

// Whether the active tier (cpu_tier.hpp) has AVX-512 VNNI.
bool gemv_int8_supported();

// The weights in the GEMV's layout. Output rows are grouped in blocks of 16; for each group of 4
// inputs a block has 64 bytes, row r's 4 weights at bytes 4r..4r+3. That is the operand
// vpdpbusd multiplies against 4 broadcast activation bytes, so one instruction adds 4 products
// to each of 16 outputs and no horizontal sum is needed.
//
// Blocks are taken tile_blocks() at a time (a tile), and the blocks of a tile are interleaved
// group by group ([group][block][64 bytes]): a tile is one sequential stream, and so is a
// thread's range of tiles, the access pattern of a plain read loop. Measured on the dev box
// (GEMV-only decode steps on the default model's shapes, 2 threads, 8 interleaved rounds
// against an AVX-512 read loop): four streams 9 KB apart, one per block, reached 93 % of the
// loop's bandwidth, one stream 100 %. A tile is the unit threads share out, so a matrix with few
// blocks gets narrower tiles: the end of a call waits for at most one tile.
//
// Rows are padded to a multiple of 16 and inputs to a multiple of 4 with zero weights.
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
  std::shared_ptr<WeightArena> arena_;     // owns packed_
  const std::int8_t* packed_;              // i8 tiles, 64-byte aligned
  std::vector<std::int32_t> compensation_; // 128 * sum_k q[n][k], padded to blocks * 16
  std::vector<float> scales_;              // weight scales, padded to blocks * 16 with zeros
};

// vpdpbusd multiplies unsigned by signed bytes: activations go in as u8 = q + 128 and the
// kernel subtracts 128 * sum(w_row). q: dense [m, in] from quantize_rows_s8; xu: [m, padded_in].
void gemv_activations(const std::int8_t* q, std::int64_t m, std::int64_t in,
                      std::int64_t padded_in, std::uint8_t* xu);

// y[m, out] (dense) = (float(xu·Wᵀ - compensation) * w_scale[n]) * x_scales[i], or += when
// accumulating. 1 <= m <= kGemvMaxRows; requires gemv_int8_supported(). threads: OpenMP
// threads, output blocks are split between them.
void gemv_int8(const GemvWeightsS8& w, const std::uint8_t* xu, const float* x_scales,
               std::int64_t m, float* y, bool accumulate, int threads);
// The same for tiles [tile_begin, tile_end) only: y's columns [tile_begin, tile_end) *
// tile_blocks() * 16 (up to out()), its other columns untouched.
void gemv_int8(const GemvWeightsS8& w, const std::uint8_t* xu, const float* x_scales,
               std::int64_t m, float* y, bool accumulate, int threads, std::int64_t tile_begin,
               std::int64_t tile_end);

}  // namespace ember::kernels::cpu
