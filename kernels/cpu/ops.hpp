// Element-wise and row-wise transformer ops in FP32: RMSNorm (of rows and of heads), rotary
// position embedding, SiLU(gate)*up and GELU(gate)*up. Row-major; `threads` is the OpenMP thread count (CpuContext::threads), rows are
// split between threads only when the work is large enough to pay for the fork.
#pragma once

#include "util/rope_layout.hpp"

#include <cstdint>
#include <vector>

namespace ember::kernels::cpu {

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, x and out dense [rows, cols]. out may
// alias x.
void rmsnorm(const float* x, const float* weight, std::int64_t rows, std::int64_t cols, float eps, float* out,
             int threads = 1);

// rmsnorm over each head_dim slice of rows of heads*head_dim values at x + r*ld, in place, with
// one weight [head_dim] for every head: the q/k norm of Qwen3 and Gemma 3 on the q or k part
// of fused qkv rows.
void rmsnorm_heads(float* x, std::int64_t rows, std::int64_t ld, int heads, int head_dim, const float* weight,
                   float eps, int threads = 1);

using ember::RopeLayout;  // util/rope_layout.hpp

// In place on rows of heads*head_dim values at x + r*ld (the q or k part of a fused qkv row).
// Pair i of the first rope_dims dims of each head turns by positions[r] * base^(-2i/rope_dims);
// the remaining head_dim - rope_dims dims are left alone.
void rope(float* x, std::int64_t rows, std::int64_t ld, int heads, int head_dim, int rope_dims,
          const std::int32_t* positions, float base, RopeLayout layout, int threads = 1);

// cos and sin of every (row, pair) angle
//   theta = positions[r] * position_scale * base^(-2i/rope_dims) / freq_factors[i],
// [rows, rope_dims/2] each: ggml's rope with its optional freq_factors (Llama 3's frequency
// scaling, rope_dims/2 positive values; nullptr for all 1) and freq_scale (linear position
// scaling, 1/factor). The angles depend only on the batch's positions: compute them once per
// forward pass and reuse them for q and k of every layer (the double-precision sin/cos are most
// of rope's cost: docs/benchmarks.md#comment-figures-s40).
struct RopeAngles {
  std::int64_t rows = 0;
  int rope_dims = 0;
  std::vector<float> cos;
  std::vector<float> sin;
};
RopeAngles rope_angles(const std::int32_t* positions, std::int64_t rows, int rope_dims, float base,
                       const float* freq_factors = nullptr, float position_scale = 1.0f);

// rope() with precomputed angles (angles.rows must equal rows).
void rope(float* x, std::int64_t rows, std::int64_t ld, int heads, int head_dim, const RopeAngles& angles,
          RopeLayout layout, int threads = 1);

// gate_up rows are [gate(ffn) | up(ffn)] (dense, row stride 2*ffn); out[r, i] =
// silu(gate[i]) * up[i] with silu(g) = g / (1 + e^-g), out dense [rows, ffn].
void silu_mul(const float* gate_up, std::int64_t rows, std::int64_t ffn, float* out, int threads = 1);
// The same with gelu (tanh approximation) for silu: GeGLU (Gemma).
void gelu_mul(const float* gate_up, std::int64_t rows, std::int64_t ffn, float* out, int threads = 1);
// out = gelu(x) (tanh approximation, as ggml_gelu) over rows of n values; out may be x.
void gelu(const float* x, std::int64_t rows, std::int64_t n, float* out, int threads = 1);
// LayerNorm: out = (x - mean) / sqrt(var + eps) * weight + bias, row by row (variance over the
// row, biased, as ggml_norm); out may be x.
void layer_norm(const float* x, const float* weight, const float* bias, std::int64_t rows, std::int64_t cols, float eps,
                float* out, int threads = 1);

}  // namespace ember::kernels::cpu
