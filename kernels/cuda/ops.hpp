// CUDA kernels of the forward pass, one launcher per op, the GPU twins of kernels/cpu (ops.hpp,
// quantize.hpp, attention.hpp) with the same shapes and conventions. Every pointer is device
// memory; every launcher only enqueues work on `stream` (errors surface at the next
// cudaGetLastError or synchronisation, which the caller checks). Row-major throughout.
#pragma once

#include "kernels/kv_layout.hpp"
#include "util/rope_layout.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ember::kernels::cuda {

// out[r] = table[ids[r]] (rows of `cols` floats): the embedding lookup, and the gather of the
// rows that need logits.
void gather_rows(const float* table, const std::int32_t* ids, std::int64_t rows, std::int64_t cols, float* out,
                 cudaStream_t stream);

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight; out may alias x.
void rmsnorm(const float* x, const float* weight, std::int64_t rows, std::int64_t cols, float eps, float* out,
             cudaStream_t stream);

// The same, in place, over each head_dim slice of rows of heads*head_dim values at x + r*ld,
// with one weight of head_dim values for every head: the q/k norm of Qwen3 and Gemma 3.
void rmsnorm_heads(float* x, std::int64_t rows, std::int64_t ld, int heads, int head_dim, const float* weight,
                   float eps, cudaStream_t stream);

// x[i] *= factor: the scaled embeddings of Gemma.
void scale(float* x, std::int64_t n, float factor, cudaStream_t stream);

// into[i] += from[i]: the residual add after a post-norm.
void add(const float* from, float* into, std::int64_t n, cudaStream_t stream);

// cos and sin of positions[r] * position_scale * base^(-2i/rope_dims) / freq_factors[i],
// [rows, rope_dims/2] each, computed in double like kernels/cpu/ops.cpp's rope_angles (same
// meaning of freq_factors, rope_dims/2 positive values in device memory or nullptr for all 1,
// and of position_scale).
void rope_angles(const std::int32_t* positions, std::int64_t rows, int rope_dims, float base, const float* freq_factors,
                 float position_scale, float* cos, float* sin, cudaStream_t stream);

// Pairs (2i, 2i+1) — GGUF llama — or (i, i + rope_dims/2) — NeoX/HF.
using ember::RopeLayout;  // util/rope_layout.hpp

// In place on rows of heads*head_dim values at x + r*ld, with angles from rope_angles().
void rope(float* x, std::int64_t rows, std::int64_t ld, int heads, int head_dim, int rope_dims, const float* cos,
          const float* sin, RopeLayout layout, cudaStream_t stream);

// gate_up rows are [gate(ffn) | up(ffn)]; out[r, i] = silu(gate[i]) * up[i], out [rows, ffn].
void silu_mul(const float* gate_up, std::int64_t rows, std::int64_t ffn, float* out, cudaStream_t stream);

// The same with gelu (tanh approximation, as kernels/cpu/ops.hpp) for silu: GeGLU (Gemma).
void gelu_mul(const float* gate_up, std::int64_t rows, std::int64_t ffn, float* out, cudaStream_t stream);

// y[r, i] += bias[i].
void add_bias(float* y, std::int64_t rows, std::int64_t cols, const float* bias, cudaStream_t stream);

// Symmetric per-row INT8, as kernels/cpu/quantize.hpp: scale = max|x| / 127, q = round-to-
// nearest-even(x * 127 / max|x|) in [-127, 127]; an all-zero or non-finite row gets scale 0.
void quantize_rows_s8(const float* x, std::int64_t rows, std::int64_t cols, std::int8_t* q, float* scales,
                      cudaStream_t stream);

// The INT8 GEMM's epilogue: y[r, c] = acc[r, c] * w_scales[c] * x_scales[r] (+ y[r, c] when
// accumulate), multiplied in that order and never fused into an FMA, like the CPU path. cols is
// a multiple of 4, as every INT8 GEMM's n (gemm_s8_supported).
void dequantize_s32(const std::int32_t* acc, const float* x_scales, const float* w_scales, std::int64_t rows,
                    std::int64_t cols, float* y, bool accumulate, cudaStream_t stream);

// The decode rows' INT8 product with its epilogue in one kernel, for m <= kMaxGemvRows rows:
// y[r, c] = (sum_i q[r, i] * w[c, i]) * w_scales[c] * x_scales[r] (+ y[r, c] when accumulate),
// the integer sum exact and the epilogue dequantize_s32's, so it equals gemm_s8 followed by
// dequantize_s32 bit for bit (a row's result never depends on which path its batch took). One
// launch and one pass over the weights instead of cuBLAS's tile kernel (which pads one row to
// a tile) plus an INT32 round trip. k must be a multiple of 4; any m works (in groups of
// kMaxGemvRows rows, each group reading the weights again).
inline constexpr std::int64_t kMaxGemvRows = 8;
void gemv_s8(const std::int8_t* q, const float* x_scales, const std::int8_t* w, const float* w_scales, std::int64_t m,
             std::int64_t n, std::int64_t k, float* y, bool accumulate, cudaStream_t stream);

// IEEE half (bits) of n floats, round to nearest even: the FP16 GEMM's input.
void to_f16(const float* x, std::int64_t n, std::uint16_t* out, cudaStream_t stream);

// ---- paged KV cache --------------------------------------------------------------------------

using kernels::KvLayout;

// Writes rows of K and V (kv_heads*head_dim floats at k + r*ldkv and v + r*ldkv) into their
// slots (block * block_size + offset); a negative slot skips its row.
void store_kv(const float* k, const float* v, std::int64_t ldkv, std::int64_t rows, const std::int32_t* slots,
              const KvLayout& layout, void* k_cache, void* v_cache, cudaStream_t stream);

// The largest head_dim paged_attention() handles (a lane keeps head_dim / 32 values).
inline constexpr int kMaxHeadDim = 256;

// Row r's query (heads*head_dim at q + r*ldq) attends causally to the KV positions t of its
// sequence with positions[r] - window < t <= positions[r] (window 0: every t <= positions[r]),
// whose block table starts at block_tables[row_tables[r]] (row_tables[r] < 0: the row is left
// untouched); head h reads kv head h / (heads / kv_heads). Softmax in FP32 of the scores times
// `scale`; out[r] at out + r*ldo. The caller guarantees heads % kv_heads == 0,
// head_dim <= kMaxHeadDim and every position inside its table.
void paged_attention(const float* q, std::int64_t ldq, const std::int32_t* positions, const std::int32_t* row_tables,
                     const std::int32_t* block_tables, std::int64_t rows, int heads, const KvLayout& layout,
                     const void* k_cache, const void* v_cache, int window, float scale, float* out, std::int64_t ldo,
                     cudaStream_t stream);

}  // namespace ember::kernels::cuda
