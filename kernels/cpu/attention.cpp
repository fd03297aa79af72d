#include "kernels/cpu/attention.hpp"

#include "kernels/cpu/math.hpp"
#include "kernels/cpu/simd.hpp"
#include "util/check.hpp"

#include <algorithm>
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
  for (std::int64_t i = 0; i < n; ++i) mx = std::fmax(mx, s[i]);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (std::int64_t i = 0; i < n; ++i) {
    s[i] = exp_approx(s[i] - mx);
    sum += s[i];
  }
  return sum;
}

// The work of one (row, kv head): the `group` query heads that share this KV head (grouped-
// query attention) are processed together so each K and V row is read from memory once and
// reused from L1, not once per query head (3x less KV traffic for the default model).
// Scores over positions 0..last, softmax, weighted sum of V. scores has room for
// group * (last + 1) floats.
// Calls fn(t0, pointer to token t0's kv_head slice, count) for each block holding tokens
// t0..t0+count-1 of 0..n-1 (token t0 + j is at pointer + j * token_stride). Walking block by
// block avoids a 64-bit division per token.
template <class T, class Fn>
void for_each_block(const T* cache, const std::int32_t* blocks, std::int64_t n, int kv_head,
                    const KvLayout& l, Fn&& fn) {
  const std::int64_t stride = token_stride(l);
  for (std::int64_t b = 0, t0 = 0; t0 < n; ++b, t0 += l.block_size) {
    const T* p = cache + static_cast<std::int64_t>(blocks[b]) * l.block_size * stride +
                 static_cast<std::int64_t>(kv_head) * l.head_dim;
    fn(t0, p, static_cast<int>(std::min<std::int64_t>(n - t0, l.block_size)));
  }
}

// The work of one (row, kv head): the `group` query heads that share this KV head (grouped-
// query attention) are processed together so each K and V row is read from memory once and
// reused from L1, not once per query head (3x less KV traffic for the default model).
// Scores over positions 0..last, softmax, weighted sum of V. scores has room for
// group * (last + 1) floats.
template <class T>
void attend_group(const float* q, const T* k_cache, const T* v_cache, const std::int32_t* blocks,
                  std::int64_t last, int kv_head, int group, const KvLayout& l, float scale,
                  float* scores, float* out, const VecOps& ops) {
  const std::int64_t n = last + 1;
  const std::int64_t stride = token_stride(l);
  const int d = l.head_dim;
  for_each_block(k_cache, blocks, n, kv_head, l, [&](std::int64_t t0, const T* k, int count) {
    for (int j = 0; j < count; ++j, k += stride)
      for (int g = 0; g < group; ++g) {
        const float* qh = q + static_cast<std::int64_t>(g) * d;
        if constexpr (sizeof(T) == 2)
          scores[g * n + t0 + j] = ops.dot_f16(qh, k, d) * scale;
        else
          scores[g * n + t0 + j] = ops.dot_f32(qh, k, d) * scale;
      }
  });
  for (int g = 0; g < group; ++g) {
    float* p = scores + g * n;
    const float inv_sum = 1.0f / softmax_in_place(p, n);
    for (std::int64_t t = 0; t < n; ++t) p[t] *= inv_sum;
    std::memset(out + static_cast<std::int64_t>(g) * d, 0, sizeof(float) * static_cast<std::size_t>(d));
  }
  // Per block, the output chunk stays in registers across the block's V rows.
  for_each_block(v_cache, blocks, n, kv_head, l, [&](std::int64_t t0, const T* v, int count) {
    for (int g = 0; g < group; ++g) {
      const float* p = scores + g * n + t0;
      float* oh = out + static_cast<std::int64_t>(g) * d;
      if constexpr (sizeof(T) == 2)
        ops.axpy_rows_f16(p, v, stride, count, oh, d);
      else
        ops.axpy_rows_f32(p, v, stride, count, oh, d);
    }
  });
}

struct Task {
  std::int32_t row;
  std::int32_t seq;
};

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

  std::vector<Task> tasks;
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
      tasks.push_back({r, s});
    }
  }

  const int group = heads / layout.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(layout.head_dim));
  const VecOps& ops = vec_ops();
  // Query heads h = kv_head * group .. + group - 1 are contiguous in the q and out rows.
  const std::int64_t n_tasks = static_cast<std::int64_t>(tasks.size()) * layout.kv_heads;
#pragma omp parallel num_threads(ctx.threads) if (ctx.threads > 1 && n_tasks > 1)
  {
    std::vector<float> scores(static_cast<std::size_t>(longest * group));
    // Dynamic: rows of one prefill attend to 1..n positions, so equal chunks would be unequal.
#pragma omp for schedule(dynamic, 2)
    for (std::int64_t i = 0; i < n_tasks; ++i) {
      const Task& task = tasks[static_cast<std::size_t>(i / layout.kv_heads)];
      const int kvh = static_cast<int>(i % layout.kv_heads);
      const std::int64_t col = static_cast<std::int64_t>(kvh) * group * layout.head_dim;
      const float* qg = q + task.row * ldq + col;
      float* og = out + task.row * ldo + col;
      const std::int32_t* blocks = seqs[task.seq].block_table;
      const std::int64_t last = positions[task.row];
      if (layout.dtype == KvDType::f16)
        attend_group(qg, static_cast<const std::uint16_t*>(k_cache),
                     static_cast<const std::uint16_t*>(v_cache), blocks, last, kvh, group, layout,
                     scale, scores.data(), og, ops);
      else
        attend_group(qg, static_cast<const float*>(k_cache), static_cast<const float*>(v_cache),
                     blocks, last, kvh, group, layout, scale, scores.data(), og, ops);
    }
  }
}

}  // namespace ember::kernels::cpu
