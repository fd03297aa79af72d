// Paged attention (see ops.hpp). One thread block per (row, query head); its warps split the
// row's KV positions round-robin and each keeps a running (online) softmax, so no score array
// is stored whatever the context length; the warps' partial results are merged at the end.
// A lane holds head_dim / 32 query and output values (DimsPerLane, templated so they stay in
// registers).
#include "kernels/cuda/ops.hpp"

#include <cuda_fp16.h>

#include <cmath>

namespace ember::kernels::cuda {
namespace {

constexpr int kWarps = 4;

__device__ float load(const float* p) { return *p; }
__device__ float load(const std::uint16_t* p) { return __half2float(__ushort_as_half(*p)); }

template <int DimsPerLane, class T>
__global__ void paged_attention_kernel(const float* q, std::int64_t ldq, const std::int32_t* positions,
                                       const std::int32_t* row_tables, const std::int32_t* block_tables, int group,
                                       KvLayout layout, const T* k_cache, const T* v_cache, int window, float scale,
                                       float* out, std::int64_t ldo) {
  const std::int64_t row = blockIdx.x;
  const int head = static_cast<int>(blockIdx.y);
  const std::int32_t table = row_tables[row];
  if (table < 0) return;  // not part of any sequence (uniform across the block: no barrier skipped)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int head_dim = layout.head_dim;
  const std::int64_t token_stride = static_cast<std::int64_t>(layout.kv_heads) * head_dim;
  const std::int64_t kv_offset = static_cast<std::int64_t>(head / group) * head_dim;

  const float* qh = q + row * ldq + static_cast<std::int64_t>(head) * head_dim;
  float qv[DimsPerLane], acc[DimsPerLane];
#pragma unroll
  for (int i = 0; i < DimsPerLane; ++i) {
    const int d = lane + 32 * i;
    qv[i] = d < head_dim ? qh[d] : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;  // running max of the scores and sum of exp(score - m)
  const int last = positions[row];
  const int first = window > 0 ? max(0, last - window + 1) : 0;
  for (int t = first + warp; t <= last; t += kWarps) {
    const std::int64_t block = block_tables[table + t / layout.block_size];
    const std::int64_t base = (block * layout.block_size + t % layout.block_size) * token_stride + kv_offset;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < DimsPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < head_dim) s += qv[i] * load(k_cache + base + d);
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    s *= scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 on the warp's first token (m = -inf)
    const float p = expf(s - m_new);
    l = l * correction + p;
#pragma unroll
    for (int i = 0; i < DimsPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < head_dim) acc[i] = acc[i] * correction + p * load(v_cache + base + d);
    }
    m = m_new;
  }

  __shared__ float warp_max[kWarps], warp_sum[kWarps];
  __shared__ float warp_acc[kWarps][kMaxHeadDim];
  if (lane == 0) {
    warp_max[warp] = m;
    warp_sum[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < DimsPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < head_dim) warp_acc[warp][d] = acc[i];
  }
  __syncthreads();
  if (warp != 0) return;
  // The first visible position always exists and belongs to warp 0, so the overall max is
  // finite; a warp that saw no position (max -inf) gets weight 0.
  float overall = warp_max[0];
  for (int w = 1; w < kWarps; ++w) overall = fmaxf(overall, warp_max[w]);
  float weight[kWarps], total = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = warp_max[w] == -INFINITY ? 0.0f : expf(warp_max[w] - overall);
    total += warp_sum[w] * weight[w];
  }
  float* oh = out + row * ldo + static_cast<std::int64_t>(head) * head_dim;
#pragma unroll
  for (int i = 0; i < DimsPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d >= head_dim) continue;
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w) o += warp_acc[w][d] * weight[w];
    oh[d] = o / total;
  }
}

template <int DimsPerLane>
void launch(const float* q, std::int64_t ldq, const std::int32_t* positions, const std::int32_t* row_tables,
            const std::int32_t* block_tables, std::int64_t rows, int heads, const KvLayout& layout, const void* k_cache,
            const void* v_cache, int window, float scale, float* out, std::int64_t ldo, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(heads));
  const int group = heads / layout.kv_heads;
  if (layout.dtype == KvCacheType::f16)
    paged_attention_kernel<DimsPerLane><<<grid, kWarps * 32, 0, stream>>>(
        q, ldq, positions, row_tables, block_tables, group, layout, static_cast<const std::uint16_t*>(k_cache),
        static_cast<const std::uint16_t*>(v_cache), window, scale, out, ldo);
  else
    paged_attention_kernel<DimsPerLane><<<grid, kWarps * 32, 0, stream>>>(
        q, ldq, positions, row_tables, block_tables, group, layout, static_cast<const float*>(k_cache),
        static_cast<const float*>(v_cache), window, scale, out, ldo);
}

}  // namespace

void paged_attention(const float* q, std::int64_t ldq, const std::int32_t* positions, const std::int32_t* row_tables,
                     const std::int32_t* block_tables, std::int64_t rows, int heads, const KvLayout& layout,
                     const void* k_cache, const void* v_cache, int window, float scale, float* out, std::int64_t ldo,
                     cudaStream_t stream) {
  if (rows <= 0) return;
  // The fewest registers that hold head_dim values per warp: 64 (most small models) -> 2.
  if (layout.head_dim <= 32)
    launch<1>(q, ldq, positions, row_tables, block_tables, rows, heads, layout, k_cache, v_cache, window, scale, out,
              ldo, stream);
  else if (layout.head_dim <= 64)
    launch<2>(q, ldq, positions, row_tables, block_tables, rows, heads, layout, k_cache, v_cache, window, scale, out,
              ldo, stream);
  else if (layout.head_dim <= 128)
    launch<4>(q, ldq, positions, row_tables, block_tables, rows, heads, layout, k_cache, v_cache, window, scale, out,
              ldo, stream);
  else
    launch<8>(q, ldq, positions, row_tables, block_tables, rows, heads, layout, k_cache, v_cache, window, scale, out,
              ldo, stream);
}

}  // namespace ember::kernels::cuda
