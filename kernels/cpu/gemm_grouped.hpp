// Weights kept in a model file's own groups of 32 (4-bit: Q4_0, Q4_1, Q4_K, "W4A8"; 8-bit:
// Q8_0) times INT8 activations, for every row count: decode's few rows and prefill's many run
// the same kernel, so a row's output never depends on its batch. Every instruction-set tier
// (scalar; AVX2, AVX-VNNI, AVX-512 VNNI; NEON, dotprod; gemm_grouped_tiers.hpp) gives the same
// bits: the products are exact integers and the float operations below are done in one order.
//
// Each group of 32 inputs of an output row is 32 unsigned values u (nibbles, or bytes) with a
// scale d and an offset o, w = d * u + o (Q4_0 is o = -8 d and Q8_0, stored as u = q + 128,
// o = -128 d: the bias 2^(bits-1); Q4_1 and Q4_K carry o). Activations are quantized per group
// of 32 as well (scale = max|x| / 127, the Q8_0 form llama.cpp multiplies these weights with),
// so a group's product is exact in INT32 and only its two scales are floats:
//   y[n] = sum over groups g of  dx_g * (d_g,n * acc_g,n + o_g,n * sum_g)      (with offsets)
//   y[n] = sum over groups g of  dx_g * (d_g,n * (acc_g,n - bias * sum_g))     (without)
// where acc is the INT32 dot product of the values with the INT8 activations and sum the sum of
// the group's INT8 activations. Groups are added in input order with one fused multiply-add
// each; that order is fixed, whatever the batch, the tile or the thread.
//
// An input row may be quantized as two terms (GroupedActivations::terms): the second holds each
// group's rounding error of the first, again as INT8 with its own scale, and the row's output
// is the first term's sum plus the second's. The lm_head takes that: its logits are what top-1
// agreement sees.
//
// Thread-safety: GroupedWeights is immutable after construction; gemm_grouped only reads it.
#pragma once

#include "kernels/cpu/cpu_tier.hpp"
#include "kernels/cpu/weight_arena.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace ember::kernels::cpu {

// Inputs per scale group.
constexpr std::int64_t kWeightGroup = 32;

// The tier gemm_grouped runs at: active_tier(), whose AMX runs the AVX-512 VNNI kernel (the
// layout is made for vpdpbusd; decode is bound by memory either way).
CpuTier grouped_gemm_tier();

// How a matrix's groups are stored: 4 or 8 bits a value, with or without an offset per group.
struct GroupFormat {
  int bits = 4;
  bool offsets = false;
  // The offset a group without one has, in steps of its scale: o = -bias() * d.
  std::int32_t bias() const { return 1 << (bits - 1); }
};

// Fills output row `row` of a matrix with `in` inputs: for each group g of kWeightGroup,
// scales[g] and offsets[g] (its d and o), and its values: 4 bits, values[16 g + e] holds input
// 32 g + e in its low nibble and 32 g + 16 + e in its high one (the pairing of Q4_0 and Q4_1
// blocks); 8 bits, values[32 g + e] holds input 32 g + e. Called from several threads at once
// for different rows.
using GroupedRowSource = std::function<void(std::int64_t row, std::uint8_t* values, float* scales, float* offsets)>;

// The weights in the kernel's layout. Output rows are taken 16 at a time (a block) and 64
// inputs at a time (a span of two groups); a block's span is a record of 64-byte lines:
//   4 bits, 8 lines of nibbles: for group h of the span and j = 0..3, 64 bytes in which bytes
//     4r..4r+3 are row r's inputs 4j..4j+3 (low nibbles) and 16+4j..16+4j+3 (high nibbles):
//     masked and shifted, that is the operand vpdpbusd multiplies with 4 broadcast activations;
//   8 bits, 16 lines of bytes: for group h, lines 8h + j hold inputs 4j..4j+3 and lines
//     8h + 4 + j inputs 16+4j..16+4j+3, so both widths feed the multiplies in one order;
//   scales (FP16, 32 bytes per group and block); with offsets, as many bytes of offsets.
// Scales and offsets are held in FP16, the type of Q4_0 and Q4_1 blocks (Q4_K's products of
// its FP16 scale and 6-bit sub-scales round to FP16, a relative 2^-11 of the group's scale).
// Two blocks make a tile, the unit threads share out. A tile's span holds its blocks' records
// interleaved line by line in the order the kernel reads them ([h][j][block] nibbles, then
// [h][block] scales, then offsets), so that a tile is one sequential stream: with each block's
// record whole, two streams 640 bytes apart, decode read a 1B model's gate_up well below the
// bandwidth one stream reaches (docs/benchmarks.md#grouped-tile-stream). Rows are padded to a
// multiple of 16 and inputs to a multiple of 64 with zero nibbles and zero scales.
// A 64-byte line is one AVX-512 register, or two 256-bit ones (output rows 0-7 and 8-15).
class GroupedWeights {
 public:
  // `in` a positive multiple of kWeightGroup. The rows are read through `source` on `threads`
  // threads and packed into memory from `arena` (huge pages), which this object keeps alive.
  // Throws ErrorCode::invalid_argument for bits other than 4 and 8.
  GroupedWeights(std::int64_t out, std::int64_t in, GroupFormat format, const GroupedRowSource& source,
                 std::shared_ptr<WeightArena> arena, int threads);

  std::int64_t out() const { return out_; }
  std::int64_t in() const { return in_; }
  GroupFormat format() const { return format_; }
  // 64-byte lines of values per span: 8 (4 bits) or 16 (8 bits).
  std::int64_t value_lines() const { return format_.bits * 2; }
  std::int64_t spans() const { return spans_; }
  std::int64_t padded_in() const { return spans_ * 64; }
  std::int64_t blocks() const { return (out_ + 15) / 16; }
  std::int64_t tiles() const { return (blocks() + kTileBlocks - 1) / kTileBlocks; }
  std::int64_t blocks_in(std::int64_t t) const {
    return blocks() - t * kTileBlocks < kTileBlocks ? blocks() - t * kTileBlocks : kTileBlocks;
  }
  std::int64_t record_bytes() const { return (value_lines() + (format_.offsets ? 2 : 1)) * 64; }
  const std::uint8_t* tile(std::int64_t t) const { return packed_ + t * kTileBlocks * spans_ * record_bytes(); }
  std::int64_t bytes() const { return blocks() * spans_ * record_bytes(); }
  // Whether decode streams these weights from memory rather than from the last-level cache: the
  // arena they share with the model's other weights outgrows it (WeightArena::outgrows_cache()).
  bool streamed_from_memory() const { return arena_->outgrows_cache(); }

  static constexpr std::int64_t kTileBlocks = 2;
  static constexpr std::int64_t kTileOutputs = kTileBlocks * 16;  // output rows per tile

 private:
  std::int64_t out_;
  std::int64_t in_;
  GroupFormat format_;
  std::int64_t spans_;
  std::shared_ptr<WeightArena> arena_;  // owns packed_
  const std::uint8_t* packed_;
};

// Activations quantized per group of kWeightGroup, the form gemm_grouped takes: q [rows][terms]
// [q_stride()] (zero from `in` to padded_in), and per group its scale and the sum of its q.
struct GroupedActivations {
  std::int64_t rows = 0, padded_in = 0;
  // 1, or 2: each row a 16-bit quantization in two INT8 term rows (quantize_rows_s8_residual),
  // the high plane then the low, whose products the kernels join in INT32 as 256 hi + lo.
  int terms = 1;
  std::vector<std::int8_t> q;
  // With two terms: the 16-bit values 256 hi + lo, [rows][q_stride], for kernels that multiply
  // 16 bits at once (the AVX2 tier's panels).
  std::vector<std::int16_t> wide;
  // Bytes from one term row of q to the next: padded_in, made an odd number of 64-byte lines.
  // A prefill panel reads the same group of 16 rows at once; 2048 bytes apart (a width of 2048),
  // every other row fell in one L1 set, and more rows than the set's ways evicted each other.
  std::int64_t q_stride() const { return padded_in / 64 % 2 == 0 ? padded_in + 64 : padded_in; }
  std::vector<float> scales;       // [rows][terms][padded_in / kWeightGroup]
  std::vector<std::int32_t> sums;  // [rows][terms][padded_in / kWeightGroup]
  // The same by group, for kernels that take many rows' terms of one group at once (the 256-bit
  // tiers' panels): [groups][rows], each row's sum of its q (with two terms, of its 16-bit values:
  // kLowTermSteps hi + lo, joined here as the kernels' row_terms joins it) and its scale (with two
  // terms, the low term's). quantize_grouped_activations writes them with the rows, index_by_group
  // for rows filled otherwise; gemm_grouped refuses activations whose copy does not match their
  // rows and groups.
  std::vector<std::int32_t> sums_by_group;
  std::vector<float> scales_by_group;

  std::int64_t groups() const { return padded_in / kWeightGroup; }
  std::int64_t term_rows() const { return rows * terms; }  // the rows the kernel multiplies
};

// x: [rows, in] with row stride ldx, into `a` (resized; its memory is reused between calls) as
// `terms` (1 or 2) INT8 terms a row. padded_in: GroupedWeights::padded_in(). threads: OpenMP
// threads, rows are split between them. tier: whose quantizer (every tier gives the same bytes;
// tests compare them), ErrorCode::invalid_argument if !tier_available(tier).
void quantize_grouped_activations(const float* x, std::int64_t rows, std::int64_t in, std::int64_t ldx,
                                  std::int64_t padded_in, GroupedActivations& a, int threads, int terms = 1,
                                  CpuTier tier = grouped_gemm_tier());

// Fills a's sums_by_group and scales_by_group from its sums and scales. quantize_grouped_activations
// does; a caller that fills or changes a's rows itself (copies of quantized rows) calls it after,
// or the panels read the old copy.
void index_by_group(GroupedActivations& a);

// y[rows, out] (dense) = x·Wᵀ, or y += x·Wᵀ when accumulating (the sum added after the
// product, as y_old + product). threads: OpenMP threads, output tiles are split between them.
void gemm_grouped(const GroupedWeights& w, const GroupedActivations& x, float* y, bool accumulate, int threads);
// The same for output tiles [tile_begin, tile_end) only: y's columns [tile_begin, tile_end) *
// kTileOutputs (up to out()), its other columns untouched; on `tier`'s kernel (tests compare
// them), ErrorCode::invalid_argument if !tier_available(tier).
void gemm_grouped(const GroupedWeights& w, const GroupedActivations& x, float* y, bool accumulate, int threads,
                  std::int64_t tile_begin, std::int64_t tile_end, CpuTier tier = grouped_gemm_tier());

// One product of gemm_grouped_batch: rows [first_row, first_row + rows) of x times w, into
// y[rows, w->out()] (y = product, or y + product when accumulating).
struct GroupedProduct {
  const GroupedWeights* w = nullptr;
  const GroupedActivations* x = nullptr;
  std::int64_t first_row = 0, rows = 0;
  float* y = nullptr;
  bool accumulate = false;
};

// Every product of `products` (count of them) as one call: the output tiles of all of them are
// shared out between `threads` threads in a single parallel region, where gemm_grouped would
// fork and join once per product. A mixture-of-experts layer's experts at decode are each one
// row times a small matrix, too little to be worth a region of their own. Each output has the
// bits gemm_grouped gives it. Throws ErrorCode::invalid_argument as gemm_grouped does.
void gemm_grouped_batch(const GroupedProduct* products, std::int64_t count, int threads,
                        CpuTier tier = grouped_gemm_tier());

}  // namespace ember::kernels::cpu
