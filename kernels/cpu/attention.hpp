// Paged attention over a block-structured KV cache. Per layer, K and V are each an array of
// [num_blocks, block_size, kv_heads, head_dim] values in IEEE half (uint16 bits) or float; a
// sequence's token t lives in block block_table[t / block_size] at offset t % block_size.
#pragma once

#include "kernels/cpu/context.hpp"
#include "kernels/kv_layout.hpp"

#include <cstdint>
#include <vector>

namespace ember::kernels::cpu {

using kernels::KvDType;
using kernels::KvLayout;

// Writes K and V of `rows` new tokens: k and v rows of kv_heads*head_dim floats at k + r*ldkv
// and v + r*ldkv (the k and v parts of fused qkv rows); slots[r] = block * block_size + offset.
// A negative slot skips its row.
void store_kv(const float* k, const float* v, std::int64_t ldkv, std::int64_t rows,
              const std::int32_t* slots, const KvLayout& layout, void* k_cache, void* v_cache);

// One sequence of the batch: its query rows [row_begin, row_begin + row_count) and the blocks
// holding its KV (block_count of them, covering every position its rows attend to).
struct AttentionSeq {
  std::int32_t row_begin;
  std::int32_t row_count;
  const std::int32_t* block_table;
  std::int32_t block_count;
};

// Buffers paged_attention reuses from call to call. They grow to the largest batch seen, so a
// step allocates nothing once warm. One per caller: two calls at once must not share one.
struct AttentionWorkspace {
  struct Tile {
    std::int32_t seq;
    std::int32_t row_begin;
    std::int32_t rows;
  };
  std::vector<Tile> tiles;      // the call's tiles of up to 8 rows of one sequence
  std::vector<float> partials;  // each (row, query head, segment)'s partial result
  std::vector<float> scratch;   // each thread's scaled queries, scores and FP32 chunk
};

// For every row r of every sequence, q[r] (heads*head_dim at q + r*ldq) attends causally to KV
// positions 0..positions[r] of its sequence; head h reads kv head h / (heads / kv_heads)
// (grouped-query). Softmax in FP32 with scale 1/sqrt(head_dim). out[r] (heads*head_dim at
// out + r*ldo) = sum_t p_t * V[t]. Rows not covered by any sequence are left untouched.
// Each query attends to the first and the second half of its blocks separately, and the two
// are merged (attention.cpp says why); parallel over (tile of rows, half) with ctx.threads. The
// query heads sharing a KV head are done together so K/V are read once per group. Throws
// ErrorCode::invalid_argument when a position is outside the sequence's blocks or the head
// counts do not divide.
void paged_attention(const float* q, std::int64_t ldq, const std::int32_t* positions,
                     const AttentionSeq* seqs, int seq_count, int heads, const KvLayout& layout,
                     const void* k_cache, const void* v_cache, float* out, std::int64_t ldo,
                     CpuContext& ctx, AttentionWorkspace& workspace);

}  // namespace ember::kernels::cpu
