// The weight tensors of a decoder (every architecture ModelConfig describes), located and
// shape-checked once, plus helpers to dequantize them. Matrices are in ggml order: a weight W with shape [in, out] has `out` rows
// of `in` contiguous values (y = W x computes one dot product per row).
#pragma once

#include "model/gguf.hpp"
#include "model/model_config.hpp"
#include "util/tensor.hpp"

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace ember::model {

struct LayerWeights {
  const GgufTensor* attn_norm = nullptr;       // [embedding]
  const GgufTensor* wqkv = nullptr;            // [embedding, q_dim + 2 kv_dim] when the file fuses them
                                               // (phi3's attn_qkv); else wq, wk, wv:
  const GgufTensor* wq = nullptr;              // [embedding, heads * head_dim]
  const GgufTensor* wk = nullptr;              // [embedding, kv_heads * head_dim]
  const GgufTensor* wv = nullptr;              // [embedding, kv_heads * head_dim]
  const GgufTensor* wo = nullptr;              // [heads * head_dim, embedding]
  const GgufTensor* bq = nullptr;              // [heads * head_dim]; nullptr unless attention_bias
  const GgufTensor* bk = nullptr;              // [kv_heads * head_dim]
  const GgufTensor* bv = nullptr;              // [kv_heads * head_dim]
  const GgufTensor* q_norm = nullptr;          // [head_dim] ([heads * head_dim] when qk_norm_whole);
                                               // nullptr unless qk_norm
  const GgufTensor* k_norm = nullptr;          // [head_dim] ([kv_heads * head_dim] when qk_norm_whole)
  const GgufTensor* post_attn_norm = nullptr;  // [embedding]; nullptr unless post_norms
  const GgufTensor* ffn_norm = nullptr;        // [embedding]
  const GgufTensor* post_ffn_norm = nullptr;   // [embedding]; nullptr unless post_norms
  const GgufTensor* w_gate = nullptr;          // [embedding, ffn]; nullptr when fused_gate_up
  const GgufTensor* w_up = nullptr;            // [embedding, ffn], or [embedding, 2 ffn] holding gate|up
  const GgufTensor* w_down = nullptr;          // [ffn, embedding]
  // Encoders (bert): attn_norm is attn_output_norm and ffn_norm layer_output_norm, each applied
  // after its residual add, with these biases; the linears' biases.
  const GgufTensor* attn_norm_bias = nullptr;  // [embedding]
  const GgufTensor* ffn_norm_bias = nullptr;   // [embedding]
  const GgufTensor* bo = nullptr;              // [embedding]
  const GgufTensor* b_up = nullptr;            // [ffn]
  const GgufTensor* b_down = nullptr;          // [embedding]
  // A routed layer (ModelConfig::routed()) has these instead of w_gate, w_up, w_down: the
  // router and each expert's matrices stacked along a third dimension (expert e's rows are
  // rows [e * out, (e + 1) * out) of the tensor's 2-D view).
  const GgufTensor* router = nullptr;     // ffn_gate_inp [embedding, experts]
  const GgufTensor* gate_exps = nullptr;  // [embedding, expert_ffn, experts]
  const GgufTensor* up_exps = nullptr;    // [embedding, expert_ffn, experts]
  const GgufTensor* down_exps = nullptr;  // [expert_ffn, embedding, experts]
  // Or, in Mixtral-style files of older llama.cpp conversions, one tensor per expert
  // (blk.N.ffn_gate.E.weight [embedding, expert_ffn], ffn_up.E, ffn_down.E [expert_ffn,
  // embedding]), expert E at index E; then the three stacked pointers are nullptr.
  std::vector<const GgufTensor*> gate_experts, up_experts, down_experts;
};

struct DecoderTensors {
  const GgufTensor* token_embd = nullptr;   // [embedding, vocab]
  const GgufTensor* output_norm = nullptr;  // [embedding]
  const GgufTensor* output = nullptr;       // [embedding, vocab]; == token_embd when tied;
                                            // output_norm and output nullptr without an lm_head
  // Encoders (bert): the embeddings' LayerNorm, and the tables added to the token embeddings.
  const GgufTensor* embd_norm = nullptr;       // [embedding]
  const GgufTensor* embd_norm_bias = nullptr;  // [embedding]
  const GgufTensor* position_embd = nullptr;   // [embedding, context_length]
  const GgufTensor* token_types = nullptr;     // [embedding, types]; may be absent
  std::vector<LayerWeights> layers;
};

// Finds every tensor of `config`'s model in `file` and checks its shape and that its type can
// be dequantized. Throws Error(invalid_model) naming a missing or misshapen tensor and
// Error(unsupported) for a tensor type ember cannot convert.
DecoderTensors map_decoder_tensors(const GgufFile& file, const ModelConfig& config);

// The whole tensor in FP32 (numel() values, rows of shape[0]).
std::vector<float> dequantize_tensor(const GgufTensor& tensor);
// The whole tensor as an owning f32 ember::Tensor: [shape[0]] for a vector, else
// [rows(), shape[0]].
Tensor dequantize_to_tensor(const GgufTensor& tensor);
// Row `row` (shape[0] values) into `dst`, e.g. one token's embedding. Throws
// Error(invalid_argument) when row is out of range.
void dequantize_row(const GgufTensor& tensor, std::int64_t row, float* dst);
// Rows [first, first + count) (shape[0] values each) into `dst`: a large matrix prepared a
// slice at a time. Throws Error(invalid_argument) when the range is out of bounds.
void dequantize_rows(const GgufTensor& tensor, std::int64_t first, std::int64_t count, float* dst);
// Several matrices with the same row width, dequantized and stacked row-wise: the fused Q|K|V
// and gate|up projections are a single GEMM each.
std::vector<float> dequantize_stacked(std::initializer_list<const GgufTensor*> tensors);
// The same into `out`, whose memory is reused when it is large enough: a loader that prepares
// one layer after another keeps its pages instead of having the OS clear fresh ones each time.
void dequantize_stacked(std::initializer_list<const GgufTensor*> tensors, std::vector<float>& out);
// A vector of `size` values, all zero when `tensor` is nullptr (an absent bias).
std::vector<float> dequantize_vector(const GgufTensor* tensor, std::int64_t size);

}  // namespace ember::model
