// The paged KV cache's memory layout as every device's kernels see it: per layer, K and V are
// [num_blocks, block_size, kv_heads] arrays of head slices; a sequence's token t lives in block
// block_table[t / block_size] at offset t % block_size. A head slice is head_dim values of the
// KV type; an int8 slice is followed by one IEEE-half scale per group of kKvInt8Group values
// (the group's max |x| / 127: llama.cpp's q8_0), so one token's K or V of one head is
// kv_head_bytes() contiguous bytes and a block of a head is read with its scales, without a
// dequantized copy or a second array to follow. One scale per whole head was tried first and lost
// too much (a few large key channels set every head's step); groups of 32 meet the quality
// targets (docs/benchmarks.md#kv-int8-groups).
// An int8 group holds its 32 values rotated by the orthonormal 32-point Hadamard transform
// (rotate_kv_group): a large channel is spread over the whole group before it sets the group's
// step, instead of leaving the other 31 values a few steps each. q.k is the same in the rotated
// basis, so attention rotates the query, and its output back, instead of un-rotating every key.
#pragma once

#include "util/kv_layout.hpp"

#include <cstdint>

namespace ember::kernels {

using ember::KvLayout;  // one type for the pool (backend::KvGeometry) and the kernels

// Bytes of one stored value: 2 (f16), 4 (f32) or 1 (int8).
constexpr std::int64_t kv_value_bytes(KvCacheType type) {
  return type == KvCacheType::f16 ? 2 : type == KvCacheType::f32 ? 4 : 1;
}

// Values per scale of an int8 head slice (the last group may be shorter), and a scale's bytes.
constexpr int kKvInt8Group = 32;
constexpr std::int64_t kKvScaleBytes = 2;
constexpr int kv_int8_groups(int head_dim) { return (head_dim + kKvInt8Group - 1) / kKvInt8Group; }

// x = H x / sqrt(32) for each whole group of kKvInt8Group values of a head of head_dim (a last,
// shorter group is left as it is). H is the Sylvester Hadamard matrix, so the transform is its
// own inverse. A fixed sequence of additions: the same bits on every device and in any batch.
inline void rotate_kv_groups(float* x, int head_dim) {
  for (int at = 0; at + kKvInt8Group <= head_dim; at += kKvInt8Group) {
    float* g = x + at;
    for (int len = 1; len < kKvInt8Group; len <<= 1)
      for (int i = 0; i < kKvInt8Group; i += 2 * len)
        for (int j = i; j < i + len; ++j) {
          const float a = g[j], b = g[j + len];
          g[j] = a + b;
          g[j + len] = a - b;
        }
    constexpr float kNorm = 0.17677669529663687f;  // 1 / sqrt(32)
    for (int i = 0; i < kKvInt8Group; ++i) g[i] *= kNorm;
  }
}

// Bytes of one token's K (or V) of one KV head: its values, and an int8 slice's scales.
constexpr std::int64_t kv_head_bytes(KvCacheType type, int head_dim) {
  return head_dim * kv_value_bytes(type) + (type == KvCacheType::int8 ? kv_int8_groups(head_dim) * kKvScaleBytes : 0);
}
constexpr std::int64_t kv_head_bytes(const KvLayout& l) { return kv_head_bytes(l.dtype, l.head_dim); }

// Bytes of one token's K (or V), all KV heads.
constexpr std::int64_t kv_token_bytes(const KvLayout& l) { return l.kv_heads * kv_head_bytes(l); }

}  // namespace ember::kernels
