// Element-wise and row-wise kernels (see ops.hpp). Products that the CPU path rounds separately
// use __fmul_rn / __fadd_rn, which nvcc never contracts into an FMA, so that both devices round
// alike where it is cheap to.
#include "kernels/cuda/ops.hpp"

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>

namespace ember::kernels::cuda {
namespace {

constexpr int kThreads = 256;  // a multiple of 32: the block reductions assume whole warps

// Grid-stride loops over n elements: enough blocks to fill the GPU, never more than needed.
unsigned grid_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, 65536));
}

#define EMBER_GRID_STRIDE(i, n)                                                                    \
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Reduces one value per thread over the block; every thread gets the result. 0 is the identity
// of both uses (sums, and maxima of absolute values).
template <class Op>
__device__ float block_reduce(float v, Op op) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? partial[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  const float result = partial[0];
  __syncthreads();  // partial is reused by the next call
  return result;
}

__global__ void gather_rows_kernel(const float* table, const std::int32_t* ids, std::int64_t rows, std::int64_t cols,
                                   float* out) {
  EMBER_GRID_STRIDE(i, rows * cols) {
    const std::int64_t r = i / cols, c = i % cols;
    out[i] = table[static_cast<std::int64_t>(ids[r]) * cols + c];
  }
}

// One block per row.
__global__ void rmsnorm_kernel(const float* x, const float* weight, std::int64_t cols, float eps, float* out) {
  const float* xr = x + blockIdx.x * cols;
  float* yr = out + blockIdx.x * cols;
  float s = 0.0f;
  for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) s += xr[i] * xr[i];
  s = block_reduce(s, Sum{});  // every read of xr happens before this barrier: out may alias x
  const float k = 1.0f / sqrtf(s / static_cast<float>(cols) + eps);
  for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = __fmul_rn(__fmul_rn(xr[i], k), weight[i]);
}

// One block per (row, head) slice.
__global__ void rmsnorm_heads_kernel(float* x, std::int64_t ld, int heads, int head_dim, const float* weight,
                                     float eps) {
  float* v = x + (blockIdx.x / heads) * ld + static_cast<std::int64_t>(blockIdx.x % heads) * head_dim;
  float s = 0.0f;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) s += v[i] * v[i];
  s = block_reduce(s, Sum{});  // every read happens before this barrier: in place is safe
  const float k = 1.0f / sqrtf(s / static_cast<float>(head_dim) + eps);
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) v[i] = __fmul_rn(__fmul_rn(v[i], k), weight[i]);
}

__global__ void scale_kernel(float* x, std::int64_t n, float factor) {
  EMBER_GRID_STRIDE(i, n) x[i] = __fmul_rn(x[i], factor);
}

__global__ void add_kernel(const float* from, float* into, std::int64_t n) {
  EMBER_GRID_STRIDE(i, n) into[i] = __fadd_rn(into[i], from[i]);
}

__global__ void rope_angles_kernel(const std::int32_t* positions, std::int64_t rows, int rope_dims, float base,
                                   const float* freq_factors, float position_scale, float* cos_out, float* sin_out) {
  const int half = rope_dims / 2;
  EMBER_GRID_STRIDE(idx, rows * half) {
    const std::int64_t r = idx / half;
    const int i = static_cast<int>(idx % half);
    // In double: at position 8191 a float angle would already be off by ~5e-4 rad. The same
    // order of operations as the CPU's rope_angles.
    double inv_freq = pow(static_cast<double>(base), -2.0 * i / rope_dims);
    if (freq_factors != nullptr) inv_freq /= freq_factors[i];
    inv_freq *= position_scale;
    const double theta = positions[r] * inv_freq;
    cos_out[idx] = static_cast<float>(cos(theta));
    sin_out[idx] = static_cast<float>(sin(theta));
  }
}

__global__ void rope_kernel(float* x, std::int64_t rows, std::int64_t ld, int heads, int head_dim, int half,
                            const float* cos_in, const float* sin_in, bool interleaved) {
  EMBER_GRID_STRIDE(idx, rows * heads * half) {
    const std::int64_t r = idx / (static_cast<std::int64_t>(heads) * half);
    const int h = static_cast<int>(idx / half % heads);
    const int i = static_cast<int>(idx % half);
    float* v = x + r * ld + static_cast<std::int64_t>(h) * head_dim;
    const int a = interleaved ? 2 * i : i;
    const int b = interleaved ? 2 * i + 1 : i + half;
    const float cs = cos_in[r * half + i], sn = sin_in[r * half + i];
    const float x0 = v[a], x1 = v[b];
    v[a] = __fsub_rn(__fmul_rn(x0, cs), __fmul_rn(x1, sn));
    v[b] = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, cs));
  }
}

__global__ void silu_mul_kernel(const float* gate_up, std::int64_t rows, std::int64_t ffn, float* out) {
  EMBER_GRID_STRIDE(i, rows * ffn) {
    const std::int64_t r = i / ffn, c = i % ffn;
    const float g = gate_up[r * 2 * ffn + c], u = gate_up[r * 2 * ffn + ffn + c];
    out[i] = g / (1.0f + expf(-g)) * u;
  }
}

// gelu's tanh approximation written as x / (1 + e^(-2y)), as the CPU's gelu_mul_row.
__global__ void gelu_mul_kernel(const float* gate_up, std::int64_t rows, std::int64_t ffn, float* out) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  EMBER_GRID_STRIDE(i, rows * ffn) {
    const std::int64_t r = i / ffn, c = i % ffn;
    const float g = gate_up[r * 2 * ffn + c], u = gate_up[r * 2 * ffn + ffn + c];
    const float y = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    out[i] = g / (1.0f + expf(-2.0f * y)) * u;
  }
}

__global__ void add_bias_kernel(float* y, std::int64_t rows, std::int64_t cols, const float* bias) {
  EMBER_GRID_STRIDE(i, rows * cols) y[i] += bias[i % cols];
}

// One block per row.
__global__ void quantize_rows_kernel(const float* x, std::int64_t cols, std::int8_t* q, float* scales) {
  const float* xr = x + blockIdx.x * cols;
  std::int8_t* qr = q + blockIdx.x * cols;
  float m = 0.0f;
  for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, fabsf(xr[i]));
  m = block_reduce(m, Max{});
  if (!(m > 0.0f) || !isfinite(m)) {
    for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) qr[i] = 0;
    if (threadIdx.x == 0) scales[blockIdx.x] = 0.0f;
    return;
  }
  const float inv = 127.0f / m;
  for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    const float v = fminf(fmaxf(rintf(__fmul_rn(xr[i], inv)), -127.0f), 127.0f);
    qr[i] = static_cast<std::int8_t>(v);
  }
  if (threadIdx.x == 0) scales[blockIdx.x] = m / 127.0f;
}

// The epilogue both INT8 paths share, multiplied in this order and never contracted.
__device__ float dequantized(std::int32_t acc, float w_scale, float x_scale) {
  return __fmul_rn(__fmul_rn(static_cast<float>(acc), w_scale), x_scale);
}

// Rows on blockIdx.y (grid-stride), four columns a thread (cols % 4 == 0: the INT8 GEMM's
// shapes), so that no thread divides a 64-bit index.
__global__ void dequantize_s32_kernel(const std::int32_t* acc, const float* x_scales, const float* w_scales,
                                      std::int64_t rows, std::int64_t cols, float* y, bool accumulate) {
  const std::int64_t c = 4 * (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x);
  if (c >= cols) return;
  const float4 ws = *reinterpret_cast<const float4*>(w_scales + c);
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int4 a = *reinterpret_cast<const int4*>(acc + r * cols + c);
    const float xs = x_scales[r];
    float4 v{dequantized(a.x, ws.x, xs), dequantized(a.y, ws.y, xs), dequantized(a.z, ws.z, xs),
             dequantized(a.w, ws.w, xs)};
    float4* out = reinterpret_cast<float4*>(y + r * cols + c);
    if (accumulate) {
      const float4 old = *out;
      v = {__fadd_rn(old.x, v.x), __fadd_rn(old.y, v.y), __fadd_rn(old.z, v.z), __fadd_rn(old.w, v.w)};
    }
    *out = v;
  }
}

// One warp per output channel (warp-stride over channels), all M rows at once so each weight
// byte is read once; lanes take 16 bytes (Vec = int4) or 4 bytes (Vec = int) of a row at a time.
template <int M, class Vec>
__global__ void gemv_s8_kernel(const std::int8_t* q, const float* x_scales, const std::int8_t* w, const float* w_scales,
                               std::int64_t n, std::int64_t k, float* y, bool accumulate) {
  constexpr int kInts = sizeof(Vec) / 4;
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x >> 5);
  const std::int64_t chunks = k / sizeof(Vec);
  for (std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x >> 5) + (threadIdx.x >> 5); c < n;
       c += warps) {
    const Vec* wr = reinterpret_cast<const Vec*>(w + c * k);
    int acc[M] = {};
    for (std::int64_t i = lane; i < chunks; i += 32) {
      const Vec wv = wr[i];
      const int* wi = reinterpret_cast<const int*>(&wv);
#pragma unroll
      for (int r = 0; r < M; ++r) {
        const Vec xv = reinterpret_cast<const Vec*>(q + r * k)[i];
        const int* xi = reinterpret_cast<const int*>(&xv);
#pragma unroll
        for (int j = 0; j < kInts; ++j) acc[r] = __dp4a(xi[j], wi[j], acc[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < M; ++r) {
      int a = acc[r];
      for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
      if (lane == 0) {
        const float v = dequantized(a, w_scales[c], x_scales[r]);
        float* out = y + r * n + c;
        *out = accumulate ? __fadd_rn(*out, v) : v;
      }
    }
  }
}

template <int M>
void launch_gemv_s8(const std::int8_t* q, const float* x_scales, const std::int8_t* w, const float* w_scales,
                    std::int64_t n, std::int64_t k, float* y, bool accumulate, cudaStream_t stream) {
  constexpr int kWarpsPerBlock = 8;
  const unsigned blocks =
      static_cast<unsigned>(std::clamp<std::int64_t>((n + kWarpsPerBlock - 1) / kWarpsPerBlock, 1, 65536));
  if (k % 16 == 0)
    gemv_s8_kernel<M, int4><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(q, x_scales, w, w_scales, n, k, y, accumulate);
  else
    gemv_s8_kernel<M, int><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(q, x_scales, w, w_scales, n, k, y, accumulate);
}

__global__ void to_f16_kernel(const float* x, std::int64_t n, std::uint16_t* out) {
  EMBER_GRID_STRIDE(i, n) out[i] = __half_as_ushort(__float2half_rn(x[i]));
}

__device__ void store_value(float* cache, std::int64_t at, float v) { cache[at] = v; }
__device__ void store_value(std::uint16_t* cache, std::int64_t at, float v) {
  cache[at] = __half_as_ushort(__float2half_rn(v));
}

template <class T>
__global__ void store_kv_kernel(const float* k, const float* v, std::int64_t ldkv, std::int64_t rows,
                                const std::int32_t* slots, std::int64_t width, T* k_cache, T* v_cache) {
  EMBER_GRID_STRIDE(i, rows * width) {
    const std::int64_t r = i / width, j = i % width;
    if (slots[r] < 0) continue;
    const std::int64_t at = static_cast<std::int64_t>(slots[r]) * width + j;
    store_value(k_cache, at, k[r * ldkv + j]);
    store_value(v_cache, at, v[r * ldkv + j]);
  }
}

}  // namespace

void gather_rows(const float* table, const std::int32_t* ids, std::int64_t rows, std::int64_t cols, float* out,
                 cudaStream_t stream) {
  if (rows <= 0) return;
  gather_rows_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(table, ids, rows, cols, out);
}

void rmsnorm(const float* x, const float* weight, std::int64_t rows, std::int64_t cols, float eps, float* out,
             cudaStream_t stream) {
  if (rows <= 0) return;
  rmsnorm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, weight, cols, eps, out);
}

void rmsnorm_heads(float* x, std::int64_t rows, std::int64_t ld, int heads, int head_dim, const float* weight,
                   float eps, cudaStream_t stream) {
  if (rows <= 0) return;
  // A head is a few dozen to a few hundred values: one warp per slice is plenty.
  rmsnorm_heads_kernel<<<static_cast<unsigned>(rows * heads), 32, 0, stream>>>(x, ld, heads, head_dim, weight, eps);
}

void scale(float* x, std::int64_t n, float factor, cudaStream_t stream) {
  if (n <= 0) return;
  scale_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n, factor);
}

void add(const float* from, float* into, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  add_kernel<<<grid_for(n), kThreads, 0, stream>>>(from, into, n);
}

void rope_angles(const std::int32_t* positions, std::int64_t rows, int rope_dims, float base, const float* freq_factors,
                 float position_scale, float* cos, float* sin, cudaStream_t stream) {
  if (rows <= 0) return;
  rope_angles_kernel<<<grid_for(rows * (rope_dims / 2)), kThreads, 0, stream>>>(positions, rows, rope_dims, base,
                                                                                freq_factors, position_scale, cos, sin);
}

void rope(float* x, std::int64_t rows, std::int64_t ld, int heads, int head_dim, int rope_dims, const float* cos,
          const float* sin, RopeLayout layout, cudaStream_t stream) {
  if (rows <= 0) return;
  const int half = rope_dims / 2;
  rope_kernel<<<grid_for(rows * heads * half), kThreads, 0, stream>>>(x, rows, ld, heads, head_dim, half, cos, sin,
                                                                      layout == RopeLayout::interleaved);
}

void silu_mul(const float* gate_up, std::int64_t rows, std::int64_t ffn, float* out, cudaStream_t stream) {
  if (rows <= 0) return;
  silu_mul_kernel<<<grid_for(rows * ffn), kThreads, 0, stream>>>(gate_up, rows, ffn, out);
}

void gelu_mul(const float* gate_up, std::int64_t rows, std::int64_t ffn, float* out, cudaStream_t stream) {
  if (rows <= 0) return;
  gelu_mul_kernel<<<grid_for(rows * ffn), kThreads, 0, stream>>>(gate_up, rows, ffn, out);
}

void add_bias(float* y, std::int64_t rows, std::int64_t cols, const float* bias, cudaStream_t stream) {
  if (rows <= 0) return;
  add_bias_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(y, rows, cols, bias);
}

void quantize_rows_s8(const float* x, std::int64_t rows, std::int64_t cols, std::int8_t* q, float* scales,
                      cudaStream_t stream) {
  if (rows <= 0) return;
  quantize_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, cols, q, scales);
}

void dequantize_s32(const std::int32_t* acc, const float* x_scales, const float* w_scales, std::int64_t rows,
                    std::int64_t cols, float* y, bool accumulate, cudaStream_t stream) {
  if (rows <= 0) return;
  const dim3 grid(static_cast<unsigned>((cols / 4 + kThreads - 1) / kThreads),
                  static_cast<unsigned>(std::min<std::int64_t>(rows, 65535)));
  dequantize_s32_kernel<<<grid, kThreads, 0, stream>>>(acc, x_scales, w_scales, rows, cols, y, accumulate);
}

void gemv_s8(const std::int8_t* q, const float* x_scales, const std::int8_t* w, const float* w_scales, std::int64_t m,
             std::int64_t n, std::int64_t k, float* y, bool accumulate, cudaStream_t stream) {
  // Groups of kMaxGemvRows rows: any m is served, though the caller picks this for small m.
  for (std::int64_t r = 0; r < m; r += kMaxGemvRows) {
    const std::int8_t* qr = q + r * k;
    float* yr = y + r * n;
    switch (std::min(m - r, kMaxGemvRows)) {
      case 1: launch_gemv_s8<1>(qr, x_scales + r, w, w_scales, n, k, yr, accumulate, stream); break;
      case 2: launch_gemv_s8<2>(qr, x_scales + r, w, w_scales, n, k, yr, accumulate, stream); break;
      case 3: launch_gemv_s8<3>(qr, x_scales + r, w, w_scales, n, k, yr, accumulate, stream); break;
      case 4: launch_gemv_s8<4>(qr, x_scales + r, w, w_scales, n, k, yr, accumulate, stream); break;
      case 5: launch_gemv_s8<5>(qr, x_scales + r, w, w_scales, n, k, yr, accumulate, stream); break;
      case 6: launch_gemv_s8<6>(qr, x_scales + r, w, w_scales, n, k, yr, accumulate, stream); break;
      case 7: launch_gemv_s8<7>(qr, x_scales + r, w, w_scales, n, k, yr, accumulate, stream); break;
      default: launch_gemv_s8<8>(qr, x_scales + r, w, w_scales, n, k, yr, accumulate, stream); break;
    }
  }
}

void to_f16(const float* x, std::int64_t n, std::uint16_t* out, cudaStream_t stream) {
  if (n <= 0) return;
  to_f16_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n, out);
}

void store_kv(const float* k, const float* v, std::int64_t ldkv, std::int64_t rows, const std::int32_t* slots,
              const KvLayout& layout, void* k_cache, void* v_cache, cudaStream_t stream) {
  if (rows <= 0) return;
  const std::int64_t width = static_cast<std::int64_t>(layout.kv_heads) * layout.head_dim;
  if (layout.dtype == KvCacheType::f16)
    store_kv_kernel<<<grid_for(rows * width), kThreads, 0, stream>>>(
        k, v, ldkv, rows, slots, width, static_cast<std::uint16_t*>(k_cache), static_cast<std::uint16_t*>(v_cache));
  else
    store_kv_kernel<<<grid_for(rows * width), kThreads, 0, stream>>>(
        k, v, ldkv, rows, slots, width, static_cast<float*>(k_cache), static_cast<float*>(v_cache));
}

}  // namespace ember::kernels::cuda
