// Paged attention over a block-structured KV cache. Per layer, K and V are each an array of
// [num_blocks, block_size, kv_heads] head slices (kernels/kv_layout.hpp): head_dim IEEE halves
// (uint16 bits), floats, or int8 values followed by their groups' half scales; a sequence's token t
// lives in block block_table[t / block_size] at offset t % block_size.
#pragma once

#include "kernels/cpu/context.hpp"
#include "kernels/kv_layout.hpp"

#include <cstdint>
#include <vector>

namespace ember::kernels::cpu {

struct VecOps;  // kernels/cpu/simd.hpp

using kernels::KvLayout;

// Writes K and V of `rows` new tokens: k and v rows of kv_heads*head_dim floats at k + r*ldkv
// and v + r*ldkv (the k and v parts of fused qkv rows); slots[r] = block * block_size + offset.
// A negative slot skips its row. An int8 cache stores each group of 32 values of a head rotated
// (rotate_kv_groups, kernels/kv_layout.hpp) as round(x / scale) with scale = max |x| / 127 of the
// rotated group (a fixed function of the row, so a token's stored K/V is the same in any batch).
void store_kv(const float* k, const float* v, std::int64_t ldkv, std::int64_t rows, const std::int32_t* slots,
              const KvLayout& layout, void* k_cache, void* v_cache);

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

// How paged_attention masks and scales; the defaults are plain causal attention.
struct AttentionOptions {
  // Sliding window (llama.cpp's LLAMA_SWA_TYPE_STANDARD): a query at position p sees key
  // positions t with p - window < t <= p, `window` keys counting its own. 0: every t <= p.
  int window = 0;
  // Factor on q.k before the softmax. 0: 1/sqrt(head_dim).
  float scale = 0.0f;
  // The inner loops to use. Null: vec_ops(), this CPU's fastest; tests pass each ISA's.
  const VecOps* ops = nullptr;
};

// For every row r of every sequence, q[r] (heads*head_dim at q + r*ldq) attends causally to the
// KV positions of its sequence that options.window leaves visible to positions[r] (all of
// 0..positions[r] by default); head h reads kv head h / (heads / kv_heads) (grouped-query).
// Softmax in FP32 of options.scale * q.k. out[r] (heads*head_dim at out + r*ldo) = sum_t p_t *
// V[t]. Rows not covered by any sequence are left untouched. Blocks wholly before the windows of
// all of a sequence's rows are not read, nor are their block_table entries (a row's first visible
// block is entry max(0, positions[r] - window + 1) / block_size), so they may be reused.
// Each query attends to the first and the second half of its visible blocks separately, and the
// two are merged (attention.cpp says why); parallel over (tile of rows, half) with ctx.threads.
// The query heads sharing a KV head are done together so K/V are read once per group. A row's
// output depends only on its own query, position and KV, never on the rest of the batch. Throws
// ErrorCode::invalid_argument when a position is outside the sequence's blocks, the head counts
// do not divide, the window is negative or the scale is not finite.
void paged_attention(const float* q, std::int64_t ldq, const std::int32_t* positions, const AttentionSeq* seqs,
                     int seq_count, int heads, const KvLayout& layout, const void* k_cache, const void* v_cache,
                     float* out, std::int64_t ldo, CpuContext& ctx, AttentionWorkspace& workspace,
                     const AttentionOptions& options = {});

}  // namespace ember::kernels::cpu
