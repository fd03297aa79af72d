#include "kernels/cpu/attention.hpp"

#include "kernels/cpu/math.hpp"
#include "kernels/cpu/simd.hpp"
#include "util/check.hpp"
#include "util/fp16.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include <omp.h>

namespace ember::kernels::cpu {

namespace {

constexpr int kMaxInt8Groups = 16;  // scales of one int8 head slice attention reads at most

void check_layout(const KvLayout& l) {
  if (l.block_size <= 0 || l.kv_heads <= 0 || l.head_dim <= 0)
    fail(ErrorCode::invalid_argument, "kv layout: bad block_size={} kv_heads={} head_dim={}", l.block_size, l.kv_heads,
         l.head_dim);
  if (l.dtype == KvCacheType::int8 && kv_int8_groups(l.head_dim) > kMaxInt8Groups)
    fail(ErrorCode::unsupported, "int8 KV cache: head_dim {} is over {}", l.head_dim, kMaxInt8Groups * kKvInt8Group);
}

// Strides in stored values (uint16 for f16, float, int8): one token's row of every KV head, and
// one head's slice in it (an int8 slice carries its scale after its values).
std::int64_t token_stride(const KvLayout& l) { return kv_token_bytes(l) / kv_value_bytes(l.dtype); }
std::int64_t head_stride(const KvLayout& l) { return kv_head_bytes(l) / kv_value_bytes(l.dtype); }

struct SoftmaxTerms {
  float max;
  float sum;
};

// s[i] = e^(s[i] - max) in place, unnormalised: a segment's terms are scaled when the segments
// are merged (merge_segments).
EMBER_CLONES SoftmaxTerms exponentiate_in_place(float* s, std::int64_t n) {
  float mx = s[0];
#pragma omp simd reduction(max : mx)
  for (std::int64_t i = 0; i < n; ++i) mx = s[i] > mx ? s[i] : mx;  // std::fmax is a libm call
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) s[i] = exp_approx(s[i] - mx);
  return {mx, fixed_order_sum(n, [s](std::int64_t i) { return s[i]; })};
}

// Asks for the kv_head slice of one block's rows to be brought into cache. A sequence's blocks
// lie anywhere in the pool and a slice is 2 of every 6 cache lines of a row, which the hardware
// prefetcher does not follow: without this, batched decode waited on memory several times
// longer than its K/V bytes take to stream (docs/benchmarks.md#attention-prefetch).
template <class T>
void prefetch_block(const T* slice, std::int64_t stride, int rows, std::int64_t bytes) {
  for (int r = 0; r < rows; ++r) {
    const char* row = reinterpret_cast<const char*>(slice + r * stride);
    for (int at = 0; at < bytes; at += 64) __builtin_prefetch(row + at);
  }
}

// How far ahead blocks are prefetched: one block of 16 tokens is about one DRAM latency of work;
// two leave room for a slow one (docs/benchmarks.md#attention-prefetch).
constexpr int kPrefetchBlocks = 2;

// The chunk grid: a block's tokens in chunks of kKeyChunk from the block's first token. The
// start of the chunk holding token t.
std::int64_t chunk_floor(std::int64_t t, int block_size) {
  const std::int64_t block_start = t / block_size * block_size;
  return block_start + (t - block_start) / kKeyChunk * kKeyChunk;
}

// Calls fn(t0, pointer to token t0's kv_head slice, keys) for each chunk of at most kKeyChunk
// keys holding tokens t0..t0+keys-1 of begin..end-1, where begin is on the chunk grid (see
// chunk_floor). (Token t0 + j is at pointer + j * token_stride.) Chunks never cross a block, and
// they are the grid's chunks (the last one cut at end), so a token's place in its chunk depends
// only on its position, never on the batch. Walking block by block avoids a 64-bit division per
// token; blocks before begin's are not touched, nor their block_table entries. The same blocks of
// the caches in `ahead` (null entries skipped: none when the lines are already cached, V as well
// as K while K is scored) are prefetched kPrefetchBlocks ahead.
template <class T, class Fn>
void for_each_chunk(const T* cache, std::array<const T*, 2> ahead, const std::int32_t* blocks, std::int64_t begin,
                    std::int64_t end, int kv_head, const KvLayout& l, Fn&& fn) {
  const std::int64_t stride = token_stride(l);
  const std::int64_t first = begin / l.block_size;
  const auto slice = [&](const T* base, std::int64_t b) {
    return base + static_cast<std::int64_t>(blocks[b]) * l.block_size * stride +
           static_cast<std::int64_t>(kv_head) * head_stride(l);
  };
  const auto prefetch = [&](std::int64_t b) {  // block b's part of the range, if any
    const std::int64_t from = std::max(begin, b * l.block_size);
    const std::int64_t to = std::min(end, (b + 1) * l.block_size);
    if (from >= to) return;
    for (const T* base : ahead)
      if (base != nullptr)
        prefetch_block(slice(base, b) + (from - b * l.block_size) * stride, stride, static_cast<int>(to - from),
                       kv_head_bytes(l));
  };
  for (std::int64_t b = first; b < first + kPrefetchBlocks; ++b) prefetch(b);
  for (std::int64_t b = first, t0 = begin; t0 < end; ++b) {
    prefetch(b + kPrefetchBlocks);
    const std::int64_t block_end = std::min(end, (b + 1) * l.block_size);
    const T* p = slice(cache, b) + (t0 - b * l.block_size) * stride;
    const int count = static_cast<int>(block_end - t0);
    for (int c = 0; c < count; c += kKeyChunk) fn(t0 + c, p + c * stride, std::min(kKeyChunk, count - c));
    t0 = block_end;
  }
}

// Loads one byte of every cache line of [p, p + bytes). Demand loads, unlike prefetch
// instructions, keep as many misses in flight as the core allows: see attend_task.
void touch_lines(const void* p, std::int64_t bytes) {
  unsigned sum = 0;
  for (std::int64_t at = 0; at < bytes; at += 64) sum += static_cast<const unsigned char*>(p)[at];
  asm volatile("" : : "r"(sum));  // the loads must happen; their values do not matter
}

// Above this many bytes of K and V per task, the warm-up pass of attend_task would evict its own
// first lines before the task reads them again.
constexpr std::int64_t kWarmBytes = 128 * 1024;

// Room for the scores of one query head over n positions: whole key chunks plus one chunk of
// slack, because a block whose size is not a multiple of kKeyChunk ends in a partial chunk that
// still writes kKeyChunk scores.
std::int64_t scores_stride(std::int64_t n) { return (n + 2 * kKeyChunk - 1) / kKeyChunk * kKeyChunk; }

// Rows of one sequence attended together: each chunk of K and V is converted to FP32 once and
// then used from L1 by all rows x group query heads, instead of being converted (and read from
// L2) once per query head.
constexpr int kTileRows = 8;

// A query's visible positions (visible_of) are attended in kSegments segments split at a block
// boundary (the first half of the blocks they touch, rounded up, then the rest), each with its
// own softmax maximum and sum, and the two are merged at the end, as flash-decoding does on
// GPUs. A task is one tile and one segment, for every KV head:
//  - one decode row is two tasks of near-equal work for two threads, where one task per KV head
//    split the default model's 3 heads 2:1 between them (with a window, the halves are of the
//    window's blocks, so they stay even however long the context);
//  - a task reads whole token rows of K and V, contiguous within a block, which the hardware
//    prefetcher follows, where a KV head's slice is 2 of every 6 cache lines of a row.
// The split depends only on the query's own position and the window, so each row's arithmetic is
// the same in any batch, decode row or prefill chunk, and so is its output. Decode and prefill
// both ran faster than with one task per (tile, KV head) (docs/benchmarks.md#attention-prefetch).
constexpr int kSegments = 2;

struct Span {
  std::int64_t begin, end;
  bool empty() const { return begin >= end; }
};

// The key positions a query at `position` sees: p - window < t <= p (llama.cpp's
// LLAMA_SWA_TYPE_STANDARD, is_masked_swa), or 0..p without a window.
Span visible_of(std::int32_t position, int window) {
  const std::int64_t end = static_cast<std::int64_t>(position) + 1;
  return {window > 0 ? std::max<std::int64_t>(0, end - window) : 0, end};
}

// Segment 0 is never empty; segment 1 is when `visible` lies in one block. Without a window
// (visible.begin == 0) this is the split of 0..n-1 by halves of its blocks.
Span segment_of(Span visible, int segment, int block_size) {
  const std::int64_t first = visible.begin / block_size;
  const std::int64_t blocks = (visible.end + block_size - 1) / block_size - first;
  const std::int64_t split = std::min(visible.end, (first + (blocks + 1) / 2) * block_size);
  return segment == 0 ? Span{visible.begin, split} : Span{split, visible.end};
}

using Tile = AttentionWorkspace::Tile;

// Floats per cache line: per-thread buffers are padded to whole lines, because two threads
// writing one line (false sharing) move it between the cores on every write
// (docs/benchmarks.md#attention-prefetch).
constexpr std::int64_t kLineFloats = 64 / sizeof(float);

std::int64_t whole_lines(std::int64_t floats) { return (floats + kLineFloats - 1) / kLineFloats * kLineFloats; }

// n floats of v (grown if needed) starting at a cache-line boundary.
float* line_aligned(std::vector<float>& v, std::int64_t n) {
  if (static_cast<std::int64_t>(v.size()) < n + kLineFloats) v.resize(static_cast<std::size_t>(n + kLineFloats));
  const auto address = reinterpret_cast<std::uintptr_t>(v.data());
  return v.data() + (-address / sizeof(float)) % kLineFloats;
}

// Where the tasks of one call leave each (segment, row, query head)'s partial result for the
// merge: the segment's softmax maximum and sum, then its unnormalised sum of p_t * V[t]. Each
// starts on its own cache line: the two segments of a row are written by two threads at once.
struct Partials {
  float* data;
  std::int64_t rows;
  int heads;
  int head_dim;
  static std::int64_t floats(std::int64_t rows, int heads, int head_dim) {
    return kSegments * rows * heads * whole_lines(head_dim + 2);
  }
  float* at(std::int64_t row, int head, int segment) const {
    return data + ((segment * rows + row) * heads + head) * whole_lines(head_dim + 2);
  }
};

// y[j * d + i] = x[j * stride + i] * scales[j * groups + i / kKvInt8Group]: `keys` int8 head
// slices of d values in FP32, in one call per chunk. The same products for every query.
EMBER_CLONES void dequantize_keys(const std::int8_t* x, std::int64_t stride, int keys, int d, const float* scales,
                                  float* y) {
  const int groups = kv_int8_groups(d);
  for (int j = 0; j < keys; ++j)
    for (int g = 0; g < groups; ++g) {
      const int at = g * kKvInt8Group, n = std::min(kKvInt8Group, d - at);
      const float scale = scales[j * groups + g];
      const std::int8_t* xg = x + j * stride + at;
      float* yg = y + j * d + at;
#pragma omp simd
      for (int i = 0; i < n; ++i) yg[i] = static_cast<float>(xg[i]) * scale;
    }
}

// n values as int8 steps of their group's scale: q = round(x / scale), scale = max |x| / 127
// rounded to half precision (and kept finite), so |q| <= 127 after the clamp.
EMBER_CLONES float quantize_group(const float* x, std::int8_t* y, int n) {
  float amax = 0.0f;
#pragma omp simd reduction(max : amax)
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = fp16_to_float(float_to_fp16(std::min(amax / 127.0f, 65504.0f)));
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
#pragma omp simd
  for (int i = 0; i < n; ++i) y[i] = static_cast<std::int8_t>(std::clamp(std::nearbyint(x[i] * inv), -127.0f, 127.0f));
  return scale;
}

// One head's values as an int8 slice: its groups' values, then their scales.
void quantize_slice(const float* x, std::int8_t* y, int d) {
  for (int g = 0, at = 0; at < d; ++g, at += kKvInt8Group) {
    const std::uint16_t half = float_to_fp16(quantize_group(x + at, y + at, std::min(kKvInt8Group, d - at)));
    std::memcpy(y + d + g * kKvScaleBytes, &half, sizeof half);
  }
}

// Views a chunk of `keys` cached rows as FP32 rows: an f32 cache is used in place, an f16 or
// int8 one is converted into `buffer` (kKeyChunk * head_dim floats), so an int8 cache is never
// dequantized beyond the chunk in hand. Conversion is a fixed function of the stored bytes, so
// every query sees the same values.
template <class T>
const float* chunk_as_f32(const T* p, std::int64_t stride, int keys, int d, float* buffer, const VecOps& ops,
                          std::int64_t& ld) {
  if constexpr (sizeof(T) == 4) {
    ld = stride;
    return p;
  } else if constexpr (sizeof(T) == 1) {
    // The chunk's half scales (after each slice's values) converted together, with F16C.
    const int groups = kv_int8_groups(d);
    std::array<std::uint16_t, kKeyChunk * kMaxInt8Groups> halves;
    std::array<float, kKeyChunk * kMaxInt8Groups> scales;
    for (int j = 0; j < keys; ++j) {
      std::memcpy(halves.data() + j * groups, p + j * stride + d,
                  static_cast<std::size_t>(groups) * sizeof(std::uint16_t));
    }
    // Every half it reads is written just above; GCC 12 for arm64 cannot see that through the
    // memcpy loop and warns. Silenced here rather than the array zeroed on every chunk.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
    ops.from_f16(halves.data(), scales.data(), keys * groups);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
    dequantize_keys(p, stride, keys, d, scales.data(), buffer);
    ld = d;
    return buffer;
  } else {
    for (int j = 0; j < keys; ++j) ops.from_f16(p + j * stride, buffer + j * d, d);
    ld = d;
    return buffer;
  }
}

struct TaskArgs {
  const float* q;
  std::int64_t ldq;
  const std::int32_t* positions;
  const std::int32_t* blocks;
  int group;
  KvLayout layout;
  int window;
  float scale;
  Partials partials;
  const VecOps* ops;
};

// Each row of a tile's part of one segment.
using RowSpans = std::array<Span, kTileRows>;

// One segment of the rows of one tile for one kv head: the `group` query heads that share this
// KV head (grouped-query attention) times the tile's rows. rows[r] is row r's part of the
// segment, `span` covers them all and starts on the chunk grid (a window's first block is
// partial: a row's part may start inside a chunk).
// Per chunk of keys, scores for every query whose segment meets the chunk; e^(s - max) per query
// over its segment; then the sum of those terms times V, chunk by chunk. Every query's
// arithmetic is the same whatever else is in its tile or batch (dot_keys scores a key the same
// however many keys share its chunk, and chunks are the fixed grid's; the exponentials and the V
// sum run over its own segment in order), so each row's output is batch invariant.
template <class T>
void attend_head(const TaskArgs& a, const Tile& tile, int segment, const RowSpans& rows, Span span, const T* k_cache,
                 const T* v_cache, int kv_head, bool warm, float* scratch) {
  const KvLayout& l = a.layout;
  const int d = l.head_dim, group = a.group;
  const int queries = tile.rows * group;
  const std::int64_t stride = token_stride(l);
  const std::int64_t ld = scores_stride(span.end - span.begin);
  // scratch: scaled queries, then scores (indexed from span.begin), then one FP32 chunk.
  float* scaled_q = scratch;
  float* scores = scaled_q + static_cast<std::int64_t>(queries) * d;
  float* chunk = scores + queries * ld;
  const auto row_of = [&](int query) { return tile.row_begin + query / group; };
  const auto head_of = [&](int query) { return kv_head * group + query % group; };
  const auto range_of = [&](int query) { return rows[static_cast<std::size_t>(query / group)]; };
  for (int i = 0; i < queries; ++i) {  // scaling q once is cheaper than scaling every score
    const float* qi = a.q + row_of(i) * a.ldq + static_cast<std::int64_t>(head_of(i)) * d;
    for (int e = 0; e < d; ++e) scaled_q[i * d + e] = qi[e] * a.scale;
    if constexpr (sizeof(T) == 1) rotate_kv_groups(scaled_q + i * d, d);  // into the keys' basis
  }
  // A lone query (decode without grouped-query heads) reads an f16 chunk in place where the tier
  // can; several convert it once for all of them.
  [[maybe_unused]] const bool direct = std::is_same_v<T, std::uint16_t> && queries == 1 &&
                                       a.ops->dot_keys_f16 != nullptr && a.ops->axpy_rows_f16 != nullptr;
  const std::array<const T*, 2> k_ahead = warm ? std::array<const T*, 2>{} : std::array<const T*, 2>{k_cache, v_cache};
  const std::array<const T*, 2> v_ahead = warm ? std::array<const T*, 2>{} : std::array<const T*, 2>{v_cache, nullptr};

  for_each_chunk(k_cache, k_ahead, a.blocks, span.begin, span.end, kv_head, l,
                 [&](std::int64_t t0, const T* k, int keys) {
                   if constexpr (std::is_same_v<T, std::uint16_t>) {
                     if (direct) {  // one query: the f16 keys read as they are
                       const Span r = range_of(0);
                       if (t0 < r.end && t0 + keys > r.begin)
                         a.ops->dot_keys_f16(scaled_q, k, stride, keys, d, scores + (t0 - span.begin));
                       return;
                     }
                   }
                   std::int64_t ldk = 0;
                   const float* kf = chunk_as_f32(k, stride, keys, d, chunk, *a.ops, ldk);
                   for (int i = 0; i < queries; ++i) {
                     const Span r = range_of(i);
                     if (t0 < r.end && t0 + keys > r.begin)  // the scores before r.begin go unused
                       a.ops->dot_keys_f32(scaled_q + i * d, kf, ldk, keys, d, scores + i * ld + (t0 - span.begin));
                   }
                 });
  for (int i = 0; i < queries; ++i) {
    const Span r = range_of(i);
    if (r.empty()) continue;
    const SoftmaxTerms terms = exponentiate_in_place(scores + i * ld + (r.begin - span.begin), r.end - r.begin);
    float* partial = a.partials.at(row_of(i), head_of(i), segment);
    partial[0] = terms.max;
    partial[1] = terms.sum;
    std::memset(partial + 2, 0, sizeof(float) * static_cast<std::size_t>(d));
  }
  // Per chunk, each query's sum stays in registers across the chunk's V rows. A chunk that starts
  // before the query's segment (the window's first key is inside it) is a branch of its own:
  // working out those offsets for every chunk made the no-window prefill slower
  // (docs/benchmarks.md#attention-prefetch).
  for_each_chunk(v_cache, v_ahead, a.blocks, span.begin, span.end, kv_head, l,
                 [&](std::int64_t t0, const T* v, int keys) {
                   // Query i's rows of the chunk added into its sum; row t0 + j is at x + j * ldx
                   // (f32, or f16 read in place).
                   const auto add_rows = [&](int i, const auto* x, std::int64_t ldx) {
                     const auto axpy = [&](const float* p, const auto* rows, int used, float* sum) {
                       if constexpr (std::is_same_v<std::remove_cv_t<std::remove_pointer_t<decltype(rows)>>, float>)
                         a.ops->axpy_rows_f32(p, rows, ldx, used, sum, d);
                       else
                         a.ops->axpy_rows_f16(p, rows, ldx, used, sum, d);
                     };
                     const Span r = range_of(i);
                     if (t0 >= r.end) return;
                     float* sum = a.partials.at(row_of(i), head_of(i), segment) + 2;
                     if (t0 >= r.begin) {
                       const int used = static_cast<int>(std::min<std::int64_t>(keys, r.end - t0));
                       axpy(scores + i * ld + (t0 - span.begin), x, used, sum);
                     } else if (t0 + keys > r.begin) {
                       const int used = static_cast<int>(std::min<std::int64_t>(t0 + keys, r.end) - r.begin);
                       axpy(scores + i * ld + (r.begin - span.begin), x + (r.begin - t0) * ldx, used, sum);
                     }
                   };
                   if constexpr (std::is_same_v<T, std::uint16_t>) {
                     if (direct) return add_rows(0, v, stride);
                   }
                   std::int64_t ldv = 0;
                   const float* vf = chunk_as_f32(v, stride, keys, d, chunk, *a.ops, ldv);
                   for (int i = 0; i < queries; ++i) add_rows(i, vf, ldv);
                 });
}

// One task: segment `segment` of every query of the tile, every KV head.
template <class T>
void attend_task(const TaskArgs& a, const Tile& tile, int segment, const T* k_cache, const T* v_cache, float* scratch) {
  const KvLayout& l = a.layout;
  RowSpans rows{};  // once per task, not per chunk and query
  Span span{std::numeric_limits<std::int64_t>::max(), 0};
  for (int r = 0; r < tile.rows; ++r) {
    const Span visible = visible_of(a.positions[tile.row_begin + r], a.window);
    const Span s = segment_of(visible, segment, l.block_size);
    rows[static_cast<std::size_t>(r)] = s;
    if (s.empty()) continue;
    span = {std::min(span.begin, s.begin), std::max(span.end, s.end)};
  }
  if (span.empty()) return;  // a short sequence: everything is in the other segment
  // Chunks from the block's fixed grid, not from the first key some row of the tile sees: a row's
  // V rows are summed one chunk per axpy_rows_f32 call, and the AVX-512 one (even and odd rows in
  // two accumulators) gives other bits for another grouping of the same rows.
  span.begin = chunk_floor(span.begin, l.block_size);
  // A decode row's K and V were written a step ago, and the weights streamed since have evicted
  // them from every cache. Scoring chunk by chunk then waits on memory: the prefetches ahead of
  // it are dropped while the core's miss buffers are full. Reading every line first, with
  // nothing else in the way, keeps the most misses in flight (docs/benchmarks.md#attention-prefetch).
  // After it the passes of attend_head prefetch nothing.
  const std::int64_t row_bytes = token_stride(l) * static_cast<std::int64_t>(sizeof(T));
  const bool warm = 2 * (span.end - span.begin) * row_bytes <= kWarmBytes;
  if (warm)
    for (const T* cache : {k_cache, v_cache})
      for_each_chunk(cache, {}, a.blocks, span.begin, span.end, 0, l,
                     [&](std::int64_t, const T* p, int keys) { touch_lines(p, keys * row_bytes); });
  for (int kv_head = 0; kv_head < l.kv_heads; ++kv_head)
    attend_head(a, tile, segment, rows, span, k_cache, v_cache, kv_head, warm, scratch);
}

// out = the query's segments merged (only the first when `one_segment`, the second being empty):
// each segment's terms scaled to the larger maximum, divided by their total. The same arithmetic
// for every query, in any batch.
void merge_segments(const Partials& p, std::int64_t row, int head, bool one_segment, float* out) {
  const int d = p.head_dim;
  const float* first = p.at(row, head, 0);
  if (one_segment) {
    const float inv = 1.0f / first[1];
    for (int e = 0; e < d; ++e) out[e] = first[2 + e] * inv;
    return;
  }
  const float* second = p.at(row, head, 1);
  const float mx = std::max(first[0], second[0]);
  const float w1 = exp_approx(first[0] - mx), w2 = exp_approx(second[0] - mx);
  const float inv = 1.0f / (first[1] * w1 + second[1] * w2);
  for (int e = 0; e < d; ++e) out[e] = (first[2 + e] * w1 + second[2 + e] * w2) * inv;
}

// The most keys one task of the tile spans (attend_task's span, at most): from the chunk holding
// its rows' first visible key to their last.
std::int64_t tile_keys(const Tile& tile, const std::int32_t* positions, int window, int block_size) {
  std::int64_t begin = std::numeric_limits<std::int64_t>::max(), end = 0;
  for (std::int32_t r = tile.row_begin; r < tile.row_begin + tile.rows; ++r) {
    const Span v = visible_of(positions[r], window);
    begin = std::min(begin, v.begin);
    end = std::max(end, v.end);
  }
  return end - chunk_floor(begin, block_size);
}

std::int64_t scratch_floats(int queries, int head_dim, std::int64_t longest) {
  return static_cast<std::int64_t>(queries) * (head_dim + scores_stride(longest)) +
         static_cast<std::int64_t>(kKeyChunk) * head_dim;
}

}  // namespace

void store_kv(const float* k, const float* v, std::int64_t ldkv, std::int64_t rows, const std::int32_t* slots,
              const KvLayout& layout, void* k_cache, void* v_cache) {
  check_layout(layout);
  const std::int64_t n = static_cast<std::int64_t>(layout.kv_heads) * layout.head_dim;
  if (ldkv < n) fail(ErrorCode::invalid_argument, "store_kv: ldkv={} < kv width {}", ldkv, n);
  const VecOps& ops = vec_ops();
  for (std::int64_t r = 0; r < rows; ++r) {
    if (slots[r] < 0) continue;
    const std::int64_t at = static_cast<std::int64_t>(slots[r]) * token_stride(layout);
    if (layout.dtype == KvCacheType::int8) {
      std::array<float, kMaxInt8Groups * kKvInt8Group> rotated;
      const auto store = [&](const float* x, void* cache, std::int64_t to) {
        std::copy_n(x, layout.head_dim, rotated.data());
        rotate_kv_groups(rotated.data(), layout.head_dim);
        quantize_slice(rotated.data(), static_cast<std::int8_t*>(cache) + to, layout.head_dim);
      };
      for (int h = 0; h < layout.kv_heads; ++h) {
        const std::int64_t from = static_cast<std::int64_t>(h) * layout.head_dim;
        const std::int64_t to = at + h * head_stride(layout);
        store(k + r * ldkv + from, k_cache, to);
        store(v + r * ldkv + from, v_cache, to);
      }
    } else if (layout.dtype == KvCacheType::f16) {
      ops.to_f16(k + r * ldkv, static_cast<std::uint16_t*>(k_cache) + at, static_cast<int>(n));
      ops.to_f16(v + r * ldkv, static_cast<std::uint16_t*>(v_cache) + at, static_cast<int>(n));
    } else {
      std::memcpy(static_cast<float*>(k_cache) + at, k + r * ldkv, sizeof(float) * static_cast<std::size_t>(n));
      std::memcpy(static_cast<float*>(v_cache) + at, v + r * ldkv, sizeof(float) * static_cast<std::size_t>(n));
    }
  }
}

void paged_attention(const float* q, std::int64_t ldq, const std::int32_t* positions, const AttentionSeq* seqs,
                     int seq_count, int heads, const KvLayout& layout, const void* k_cache, const void* v_cache,
                     float* out, std::int64_t ldo, CpuContext& ctx, AttentionWorkspace& ws,
                     const AttentionOptions& options) {
  check_layout(layout);
  if (options.window < 0) fail(ErrorCode::invalid_argument, "attention: window={} is negative", options.window);
  if (!std::isfinite(options.scale))
    fail(ErrorCode::invalid_argument, "attention: scale={} is not finite", options.scale);
  if (heads <= 0 || heads % layout.kv_heads != 0)
    fail(ErrorCode::invalid_argument, "attention: heads={} is not a multiple of kv_heads={}", heads, layout.kv_heads);
  const std::int64_t width = static_cast<std::int64_t>(heads) * layout.head_dim;
  if (ldq < width || ldo < width)
    fail(ErrorCode::invalid_argument, "attention: ldq={} / ldo={} below heads*head_dim={}", ldq, ldo, width);

  ws.tiles.clear();
  std::int64_t rows = 0;
  for (int s = 0; s < seq_count; ++s) {
    const AttentionSeq& seq = seqs[s];
    const std::int64_t capacity = static_cast<std::int64_t>(seq.block_count) * layout.block_size;
    for (std::int32_t r = seq.row_begin; r < seq.row_begin + seq.row_count; ++r) {
      if (positions[r] < 0 || positions[r] >= capacity)
        fail(ErrorCode::invalid_argument, "attention: row {} position {} outside its sequence's {} blocks of {}", r,
             positions[r], seq.block_count, layout.block_size);
    }
    rows = std::max<std::int64_t>(rows, seq.row_begin + seq.row_count);
    for (std::int32_t r = 0; r < seq.row_count; r += kTileRows)
      ws.tiles.push_back({s, seq.row_begin + r, std::min(kTileRows, seq.row_count - r)});
  }
  // The last tiles of a prefill attend to the most positions: handing them out first balances
  // the threads' shares better. The order changes no result.
  std::reverse(ws.tiles.begin(), ws.tiles.end());
  std::int64_t longest = 0;  // keys of the longest task
  for (const Tile& tile : ws.tiles)
    longest = std::max(longest, tile_keys(tile, positions, options.window, layout.block_size));

  const int group = heads / layout.kv_heads;
  const std::int64_t per_thread = whole_lines(scratch_floats(kTileRows * group, layout.head_dim, longest));
  const int threads = std::max(1, ctx.threads);
  float* const scratch_base = line_aligned(ws.scratch, per_thread * threads);
  const Partials partials{line_aligned(ws.partials, Partials::floats(rows, heads, layout.head_dim)), rows, heads,
                          layout.head_dim};
  const float scale = options.scale != 0.0f ? options.scale : 1.0f / std::sqrt(static_cast<float>(layout.head_dim));
  const VecOps* ops = options.ops != nullptr ? options.ops : &vec_ops();
  const TaskArgs args{q, ldq, positions, nullptr, group, layout, options.window, scale, partials, ops};
  const std::vector<Tile>& tiles = ws.tiles;
  const auto n_tiles = static_cast<std::int64_t>(tiles.size());
  const std::int64_t n_tasks = n_tiles * kSegments;
#pragma omp parallel num_threads(threads) if (threads > 1 && n_tasks > 1)
  {
    float* scratch = scratch_base + per_thread * omp_get_thread_num();
    // Dynamic: tiles attend to different numbers of positions.
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < n_tasks; ++i) {
      const Tile& tile = tiles[static_cast<std::size_t>(i / kSegments)];
      TaskArgs a = args;
      a.blocks = seqs[tile.seq].block_table;
      const int segment = static_cast<int>(i % kSegments);
      if (layout.dtype == KvCacheType::f16)
        attend_task(a, tile, segment, static_cast<const std::uint16_t*>(k_cache),
                    static_cast<const std::uint16_t*>(v_cache), scratch);
      else if (layout.dtype == KvCacheType::int8)
        attend_task(a, tile, segment, static_cast<const std::int8_t*>(k_cache),
                    static_cast<const std::int8_t*>(v_cache), scratch);
      else
        attend_task(a, tile, segment, static_cast<const float*>(k_cache), static_cast<const float*>(v_cache), scratch);
    }
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < n_tiles; ++t) {
      const Tile& tile = tiles[static_cast<std::size_t>(t)];
      for (std::int32_t r = tile.row_begin; r < tile.row_begin + tile.rows; ++r) {
        const Span visible = visible_of(positions[r], options.window);
        const bool one_segment = segment_of(visible, 1, layout.block_size).empty();
        for (int h = 0; h < heads; ++h) {
          float* head_out = out + r * ldo + static_cast<std::int64_t>(h) * layout.head_dim;
          merge_segments(args.partials, r, h, one_segment, head_out);
          // An int8 cache's values are rotated: so is their weighted sum, until rotated back.
          if (layout.dtype == KvCacheType::int8) rotate_kv_groups(head_out, layout.head_dim);
        }
      }
    }
  }
}

}  // namespace ember::kernels::cpu
