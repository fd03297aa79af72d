#include "kernels/cpu/attention.hpp"

#include "kernels/cpu/math.hpp"
#include "kernels/cpu/simd.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

namespace ember::kernels::cpu {

namespace {

void check_layout(const KvLayout& l) {
  if (l.block_size <= 0 || l.kv_heads <= 0 || l.head_dim <= 0)
    fail(ErrorCode::invalid_argument, "kv layout: bad block_size={} kv_heads={} head_dim={}",
         l.block_size, l.kv_heads, l.head_dim);
}

std::int64_t token_stride(const KvLayout& l) {
  return static_cast<std::int64_t>(l.kv_heads) * l.head_dim;
}

EMBER_CLONES float softmax_in_place(float* s, std::int64_t n) {
  float mx = s[0];
#pragma omp simd reduction(max : mx)
  for (std::int64_t i = 0; i < n; ++i) mx = s[i] > mx ? s[i] : mx;  // std::fmax is a libm call
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (std::int64_t i = 0; i < n; ++i) {
    s[i] = exp_approx(s[i] - mx);
    sum += s[i];
  }
  return sum;
}

// Asks for the kv_head slice of one block's rows to be brought into cache. A sequence's blocks
// lie anywhere in the pool and a slice is 2 of every 6 cache lines of a row, which the hardware
// prefetcher does not follow: without this, batched decode waited on memory ~4x longer than
// its K/V bytes take to stream.
template <class T>
void prefetch_block(const T* slice, std::int64_t stride, int rows, int head_dim) {
  const int bytes = head_dim * static_cast<int>(sizeof(T));
  for (int r = 0; r < rows; ++r) {
    const char* row = reinterpret_cast<const char*>(slice + r * stride);
    for (int at = 0; at < bytes; at += 64) __builtin_prefetch(row + at);
  }
}

// How far ahead blocks are prefetched: one block of 16 tokens is ~0.2 us of work, about one
// DRAM latency; two leave room for a slow one (batched decode, 32 streams: 465 tok/s without
// prefetching, 556-572 one block ahead, 470-620 two ahead on a noisy machine).
constexpr int kPrefetchBlocks = 2;

// Calls fn(t0, pointer to token t0's kv_head slice, keys) for each chunk of at most kKeyChunk
// keys holding tokens t0..t0+keys-1 of 0..n-1 (token t0 + j is at pointer + j * token_stride).
// Chunks never cross a block, and their bounds depend only on the positions, never on the
// batch. Walking block by block avoids a 64-bit division per token. The same blocks of the
// caches in `ahead` (null entries skipped: none when the lines are already cached, V as well as
// K while K is scored) are prefetched kPrefetchBlocks ahead.
template <class T, class Fn>
void for_each_chunk(const T* cache, std::array<const T*, 2> ahead, const std::int32_t* blocks,
                    std::int64_t n, int kv_head, const KvLayout& l, Fn&& fn) {
  const std::int64_t stride = token_stride(l);
  const auto slice = [&](const T* base, std::int64_t b) {
    return base + static_cast<std::int64_t>(blocks[b]) * l.block_size * stride +
           static_cast<std::int64_t>(kv_head) * l.head_dim;
  };
  const auto prefetch = [&](std::int64_t b) {  // block b, if the sequence reaches it
    const std::int64_t t0 = b * l.block_size;
    if (t0 >= n) return;
    const int rows = static_cast<int>(std::min<std::int64_t>(n - t0, l.block_size));
    for (const T* base : ahead)
      if (base != nullptr) prefetch_block(slice(base, b), stride, rows, l.head_dim);
  };
  for (std::int64_t b = 0; b < kPrefetchBlocks; ++b) prefetch(b);
  for (std::int64_t b = 0, t0 = 0; t0 < n; ++b, t0 += l.block_size) {
    prefetch(b + kPrefetchBlocks);
    const T* p = slice(cache, b);
    const int count = static_cast<int>(std::min<std::int64_t>(n - t0, l.block_size));
    for (int c = 0; c < count; c += kKeyChunk)
      fn(t0 + c, p + c * stride, std::min(kKeyChunk, count - c));
  }
}

// Loads one byte of every cache line of [p, p + bytes). Demand loads, unlike prefetch
// instructions, keep as many misses in flight as the core allows: see attend_tile.
void touch_lines(const void* p, std::int64_t bytes) {
  unsigned sum = 0;
  for (std::int64_t at = 0; at < bytes; at += 64) sum += static_cast<const unsigned char*>(p)[at];
  asm volatile("" : : "r"(sum));  // the loads must happen; their values do not matter
}

// Above this many bytes of K and V per task, the warm-up pass of attend_tile would evict its own
// first lines before the task reads them again.
constexpr std::int64_t kWarmBytes = 128 * 1024;

// Room for the scores of one query head over n positions: whole key chunks plus one chunk of
// slack, because a block whose size is not a multiple of kKeyChunk ends in a partial chunk that
// still writes kKeyChunk scores.
std::int64_t scores_stride(std::int64_t n) {
  return (n + 2 * kKeyChunk - 1) / kKeyChunk * kKeyChunk;
}

// Rows of one sequence attended together: each chunk of K and V is converted to FP32 once and
// then used from L1 by all rows x group query heads, instead of being converted (and read from
// L2) once per query head.
constexpr int kTileRows = 8;

struct Tile {
  std::int32_t seq;
  std::int32_t row_begin;
  std::int32_t rows;
};

// Views a chunk of `keys` cached rows as FP32 rows: an f32 cache is used in place, an f16 one is
// converted into `buffer` (kKeyChunk * head_dim floats). Conversion is exact, so either way
// every query sees the same values.
template <class T>
const float* chunk_as_f32(const T* p, std::int64_t stride, int keys, int d, float* buffer,
                          const VecOps& ops, std::int64_t& ld) {
  if constexpr (sizeof(T) == 4) {
    ld = stride;
    return p;
  } else {
    for (int j = 0; j < keys; ++j) ops.from_f16(p + j * stride, buffer + j * d, d);
    ld = d;
    return buffer;
  }
}

// The rows of one tile and one kv head: the `group` query heads that share this KV head
// (grouped-query attention) times the tile's rows. Per chunk of keys, scores for every query
// whose row reaches the chunk; softmax per query over positions 0..last; then the weighted sum
// of V chunk by chunk. Every query's arithmetic is the same whatever else is in its tile or
// batch (dot_keys scores a key the same however many keys share its chunk; softmax and the V
// sum run over its own positions in order), so each row's output is batch invariant.
template <class T>
void attend_tile(const float* q, std::int64_t ldq, const std::int32_t* positions, const Tile& tile,
                 const std::int32_t* blocks, const T* k_cache, const T* v_cache, int kv_head,
                 int group, const KvLayout& l, float scale, float* scratch, float* out,
                 std::int64_t ldo, const VecOps& ops) {
  const int d = l.head_dim;
  const int queries = tile.rows * group;
  const std::int64_t stride = token_stride(l);
  std::int64_t n_max = 0;
  for (int r = 0; r < tile.rows; ++r) n_max = std::max<std::int64_t>(n_max, positions[tile.row_begin + r] + 1);
  const std::int64_t ld = scores_stride(n_max);
  // scratch: scaled queries, then scores, then one FP32 chunk of K or V.
  float* scaled_q = scratch;
  float* scores = scaled_q + static_cast<std::int64_t>(queries) * d;
  float* chunk = scores + queries * ld;
  const auto last_of = [&](int query) { return positions[tile.row_begin + query / group]; };
  const auto q_of = [&](int query) {
    return q + (tile.row_begin + query / group) * ldq + static_cast<std::int64_t>(query % group) * d;
  };
  const auto out_of = [&](int query) {
    return out + (tile.row_begin + query / group) * ldo + static_cast<std::int64_t>(query % group) * d;
  };
  for (int i = 0; i < queries; ++i)  // scaling q once is cheaper than scaling every score
    for (int e = 0; e < d; ++e) scaled_q[i * d + e] = q_of(i)[e] * scale;

  // A decode row's K and V were written a step ago, and the weights streamed since have evicted
  // them from every cache. Scoring chunk by chunk then waits on memory: the prefetches ahead of
  // it are dropped while the core's miss buffers are full. Reading every line first, with
  // nothing else in the way, keeps the most misses in flight. On the dev box, one decode row at
  // 80 positions after a 64 MB stream, one thread: 22 us without this pass, 17.6 us with it
  // (5.5 us with everything cached); ember-bench tg128, 3 interleaved pairs: 5.1 / 5.2 / 5.6 ms
  // per decode step against 5.3 / 5.7 / 5.9 ms.
  // After it the passes below prefetch nothing.
  const std::int64_t slice_bytes = static_cast<std::int64_t>(d) * sizeof(T);
  const bool warm = 2 * n_max * slice_bytes <= kWarmBytes;
  if (warm)
    for (const T* cache : {k_cache, v_cache})
      for_each_chunk(cache, {}, blocks, n_max, kv_head, l, [&](std::int64_t, const T* p, int keys) {
        for (int j = 0; j < keys; ++j) touch_lines(p + j * stride, slice_bytes);
      });
  const std::array<const T*, 2> k_ahead = warm ? std::array<const T*, 2>{} : std::array<const T*, 2>{k_cache, v_cache};
  const std::array<const T*, 2> v_ahead = warm ? std::array<const T*, 2>{} : std::array<const T*, 2>{v_cache, nullptr};

  for_each_chunk(k_cache, k_ahead, blocks, n_max, kv_head, l, [&](std::int64_t t0, const T* k, int keys) {
    std::int64_t ldk = 0;
    const float* kf = chunk_as_f32(k, stride, keys, d, chunk, ops, ldk);
    for (int i = 0; i < queries; ++i)
      if (last_of(i) >= t0) ops.dot_keys_f32(scaled_q + i * d, kf, ldk, keys, d, scores + i * ld + t0);
  });
  for (int i = 0; i < queries; ++i) {
    float* p = scores + i * ld;
    const std::int64_t n = last_of(i) + 1;
    const float inv_sum = 1.0f / softmax_in_place(p, n);
    for (std::int64_t t = 0; t < n; ++t) p[t] *= inv_sum;
    std::memset(out_of(i), 0, sizeof(float) * static_cast<std::size_t>(d));
  }
  // Per chunk, each query's output stays in registers across the chunk's V rows.
  for_each_chunk(v_cache, v_ahead, blocks, n_max, kv_head, l, [&](std::int64_t t0, const T* v, int keys) {
    std::int64_t ldv = 0;
    const float* vf = chunk_as_f32(v, stride, keys, d, chunk, ops, ldv);
    for (int i = 0; i < queries; ++i) {
      const std::int64_t last = last_of(i);
      if (last < t0) continue;
      const int used = static_cast<int>(std::min<std::int64_t>(keys, last - t0 + 1));
      ops.axpy_rows_f32(scores + i * ld + t0, vf, ldv, used, out_of(i), d);
    }
  });
}

std::int64_t scratch_floats(int queries, int head_dim, std::int64_t longest) {
  return static_cast<std::int64_t>(queries) * (head_dim + scores_stride(longest)) +
         static_cast<std::int64_t>(kKeyChunk) * head_dim;
}

}  // namespace

void store_kv(const float* k, const float* v, std::int64_t ldkv, std::int64_t rows,
              const std::int32_t* slots, const KvLayout& layout, void* k_cache, void* v_cache) {
  check_layout(layout);
  const std::int64_t n = token_stride(layout);
  if (ldkv < n) fail(ErrorCode::invalid_argument, "store_kv: ldkv={} < kv width {}", ldkv, n);
  const VecOps& ops = vec_ops();
  for (std::int64_t r = 0; r < rows; ++r) {
    if (slots[r] < 0) continue;
    const std::int64_t at = static_cast<std::int64_t>(slots[r]) * n;
    if (layout.dtype == KvDType::f16) {
      ops.to_f16(k + r * ldkv, static_cast<std::uint16_t*>(k_cache) + at, static_cast<int>(n));
      ops.to_f16(v + r * ldkv, static_cast<std::uint16_t*>(v_cache) + at, static_cast<int>(n));
    } else {
      std::memcpy(static_cast<float*>(k_cache) + at, k + r * ldkv, sizeof(float) * static_cast<std::size_t>(n));
      std::memcpy(static_cast<float*>(v_cache) + at, v + r * ldkv, sizeof(float) * static_cast<std::size_t>(n));
    }
  }
}

void paged_attention(const float* q, std::int64_t ldq, const std::int32_t* positions,
                     const AttentionSeq* seqs, int seq_count, int heads, const KvLayout& layout,
                     const void* k_cache, const void* v_cache, float* out, std::int64_t ldo,
                     CpuContext& ctx) {
  check_layout(layout);
  if (heads <= 0 || heads % layout.kv_heads != 0)
    fail(ErrorCode::invalid_argument, "attention: heads={} is not a multiple of kv_heads={}",
         heads, layout.kv_heads);
  const std::int64_t width = static_cast<std::int64_t>(heads) * layout.head_dim;
  if (ldq < width || ldo < width)
    fail(ErrorCode::invalid_argument, "attention: ldq={} / ldo={} below heads*head_dim={}", ldq,
         ldo, width);

  std::vector<Tile> tiles;
  std::int64_t longest = 0;
  for (int s = 0; s < seq_count; ++s) {
    const AttentionSeq& seq = seqs[s];
    const std::int64_t capacity = static_cast<std::int64_t>(seq.block_count) * layout.block_size;
    for (std::int32_t r = seq.row_begin; r < seq.row_begin + seq.row_count; ++r) {
      if (positions[r] < 0 || positions[r] >= capacity)
        fail(ErrorCode::invalid_argument,
             "attention: row {} position {} outside its sequence's {} blocks of {}", r,
             positions[r], seq.block_count, layout.block_size);
      longest = std::max<std::int64_t>(longest, positions[r] + 1);
    }
    for (std::int32_t r = 0; r < seq.row_count; r += kTileRows)
      tiles.push_back({s, seq.row_begin + r, std::min(kTileRows, seq.row_count - r)});
  }
  // The last tiles of a prefill attend to the most positions: handing them out first balances
  // the threads' shares better. The order changes no result.
  std::reverse(tiles.begin(), tiles.end());

  const int group = heads / layout.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(layout.head_dim));
  const VecOps& ops = vec_ops();
  // Query heads h = kv_head * group .. + group - 1 are contiguous in the q and out rows.
  const std::int64_t n_tasks = static_cast<std::int64_t>(tiles.size()) * layout.kv_heads;
#pragma omp parallel num_threads(ctx.threads) if (ctx.threads > 1 && n_tasks > 1)
  {
    std::vector<float> scratch(static_cast<std::size_t>(scratch_floats(kTileRows * group, layout.head_dim, longest)));
    // Dynamic: tiles attend to different numbers of positions.
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < n_tasks; ++i) {
      const Tile& tile = tiles[static_cast<std::size_t>(i / layout.kv_heads)];
      const int kvh = static_cast<int>(i % layout.kv_heads);
      const std::int64_t col = static_cast<std::int64_t>(kvh) * group * layout.head_dim;
      const std::int32_t* blocks = seqs[tile.seq].block_table;
      if (layout.dtype == KvDType::f16)
        attend_tile(q + col, ldq, positions, tile, blocks, static_cast<const std::uint16_t*>(k_cache),
                    static_cast<const std::uint16_t*>(v_cache), kvh, group, layout, scale,
                    scratch.data(), out + col, ldo, ops);
      else
        attend_tile(q + col, ldq, positions, tile, blocks, static_cast<const float*>(k_cache),
                    static_cast<const float*>(v_cache), kvh, group, layout, scale, scratch.data(),
                    out + col, ldo, ops);
    }
  }
}

}  // namespace ember::kernels::cpu
