#include "model/decoder_tensors.hpp"

#include "util/check.hpp"

#include <fmt/ranges.h>

#include <string>

namespace ember::model {
namespace {

std::string shape_string(const std::vector<std::int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

class WeightFinder {
 public:
  explicit WeightFinder(const GgufFile& file) : file_(file) {}

  const GgufTensor* get(const std::string& name, std::vector<std::int64_t> shape) const {
    const GgufTensor* t = file_.find_tensor(name);
    if (t == nullptr) fail(ErrorCode::invalid_model, "{}: tensor '{}' is missing", file_.path(), name);
    if (t->shape != shape) {
      fail(ErrorCode::invalid_model, "{}: tensor '{}' has shape {}, expected {}", file_.path(), name,
           shape_string(t->shape), shape_string(shape));
    }
    if (!ggml_type_info(t->type).dequantizable) {
      fail(ErrorCode::unsupported, "{}: tensor '{}' has type {}, which ember cannot dequantize", file_.path(), name,
           ggml_type_info(t->type).name);
    }
    return t;
  }

 private:
  const GgufFile& file_;
};

// BERT's tensors (llama.cpp's llama_model_bert::load_arch_tensors).
void map_bert_tensors(const GgufFile& file, const WeightFinder& w, const ModelConfig& c, DecoderTensors& out) {
  const std::int64_t e = c.embedding;
  out.embd_norm = w.get("token_embd_norm.weight", {e});
  out.embd_norm_bias = w.get("token_embd_norm.bias", {e});
  out.position_embd = w.get("position_embd.weight", {e, c.context_length});
  if (const GgufTensor* t = file.find_tensor("token_types.weight"))
    out.token_types = w.get("token_types.weight", {e, t->shape.size() == 2 ? t->shape[1] : 0});
  for (int i = 0; i < c.layers; ++i) {
    const std::string p = fmt::format("blk.{}.", i);
    LayerWeights& l = out.layers[static_cast<std::size_t>(i)];
    l.attn_norm = w.get(p + "attn_output_norm.weight", {e});
    l.attn_norm_bias = w.get(p + "attn_output_norm.bias", {e});
    l.ffn_norm = w.get(p + "layer_output_norm.weight", {e});
    l.ffn_norm_bias = w.get(p + "layer_output_norm.bias", {e});
    l.bo = w.get(p + "attn_output.bias", {e});
    l.b_up = w.get(p + "ffn_up.bias", {c.ffn});
    l.b_down = w.get(p + "ffn_down.bias", {e});
  }
}

}  // namespace

DecoderTensors map_decoder_tensors(const GgufFile& file, const ModelConfig& c) {
  const WeightFinder w(file);
  const std::int64_t e = c.embedding, q = std::int64_t{c.heads} * c.head_dim;
  const std::int64_t kv = std::int64_t{c.kv_heads} * c.head_dim;
  DecoderTensors out;
  out.token_embd = w.get("token_embd.weight", {e, c.vocab});
  if (c.has_lm_head) {
    out.output_norm = w.get("output_norm.weight", {e});
    out.output = c.tied_embeddings ? out.token_embd : w.get("output.weight", {e, c.vocab});
  }
  out.layers.resize(static_cast<std::size_t>(c.layers));
  if (c.norm_after_residual) map_bert_tensors(file, w, c, out);
  for (int i = 0; i < c.layers; ++i) {
    const std::string p = fmt::format("blk.{}.", i);
    LayerWeights& l = out.layers[static_cast<std::size_t>(i)];
    if (!c.norm_after_residual) l.attn_norm = w.get(p + "attn_norm.weight", {e});
    if (file.find_tensor(p + "attn_qkv.weight") != nullptr) {
      l.wqkv = w.get(p + "attn_qkv.weight", {e, q + 2 * kv});
    } else {
      l.wq = w.get(p + "attn_q.weight", {e, q});
      l.wk = w.get(p + "attn_k.weight", {e, kv});
      l.wv = w.get(p + "attn_v.weight", {e, kv});
    }
    l.wo = w.get(p + "attn_output.weight", {q, e});
    if (c.attention_bias) {
      l.bq = w.get(p + "attn_q.bias", {q});
      l.bk = w.get(p + "attn_k.bias", {kv});
      l.bv = w.get(p + "attn_v.bias", {kv});
    }
    if (c.qk_norm) {
      l.q_norm = w.get(p + "attn_q_norm.weight", {c.qk_norm_whole ? q : c.head_dim});
      l.k_norm = w.get(p + "attn_k_norm.weight", {c.qk_norm_whole ? kv : c.head_dim});
    }
    if (c.post_norms) {
      l.post_attn_norm = w.get(p + "post_attention_norm.weight", {e});
      l.post_ffn_norm = w.get(p + "post_ffw_norm.weight", {e});
    }
    if (!c.norm_after_residual) l.ffn_norm = w.get(p + "ffn_norm.weight", {e});
    if (c.routed()) {
      const std::int64_t n = c.experts, f = c.expert_ffn;
      l.router = w.get(p + "ffn_gate_inp.weight", {e, n});
      if (file.find_tensor(p + "ffn_gate_exps.weight") == nullptr &&
          file.find_tensor(p + "ffn_gate.0.weight") != nullptr) {
        for (int x = 0; x < c.experts; ++x) {  // one tensor per expert
          l.gate_experts.push_back(w.get(fmt::format("{}ffn_gate.{}.weight", p, x), {e, f}));
          l.up_experts.push_back(w.get(fmt::format("{}ffn_up.{}.weight", p, x), {e, f}));
          l.down_experts.push_back(w.get(fmt::format("{}ffn_down.{}.weight", p, x), {f, e}));
        }
        if (file.find_tensor(fmt::format("{}ffn_gate.{}.weight", p, c.experts)) != nullptr)
          fail(ErrorCode::invalid_model, "{}: layer {} has more expert tensors than its {} expert_count ({})",
               file.path(), i, c.architecture, c.experts);
        continue;
      }
      l.gate_exps = w.get(p + "ffn_gate_exps.weight", {e, f, n});
      l.up_exps = w.get(p + "ffn_up_exps.weight", {e, f, n});
      l.down_exps = w.get(p + "ffn_down_exps.weight", {f, e, n});
      continue;
    }
    if (!c.gated()) {
      l.w_up = w.get(p + "ffn_up.weight", {e, c.ffn});
    } else if (c.fused_gate_up) {
      l.w_up = w.get(p + "ffn_up.weight", {e, 2 * std::int64_t{c.ffn}});
    } else {
      l.w_gate = w.get(p + "ffn_gate.weight", {e, c.ffn});
      l.w_up = w.get(p + "ffn_up.weight", {e, c.ffn});
    }
    l.w_down = w.get(p + "ffn_down.weight", {c.ffn, e});
  }
  return out;
}

std::vector<float> dequantize_tensor(const GgufTensor& tensor) {
  std::vector<float> out(static_cast<std::size_t>(tensor.numel()));
  dequantize(tensor.type, tensor.data, out.data(), tensor.numel());
  return out;
}

Tensor dequantize_to_tensor(const GgufTensor& tensor) {
  Tensor t = tensor.shape.size() == 1 ? Tensor::empty(DType::f32, {tensor.shape[0]})
                                      : Tensor::empty(DType::f32, {tensor.rows(), tensor.shape[0]});
  dequantize(tensor.type, tensor.data, t.data<float>(), tensor.numel());
  return t;
}

void dequantize_row(const GgufTensor& tensor, std::int64_t row, float* dst) {
  if (row < 0 || row >= tensor.rows()) {
    fail(ErrorCode::invalid_argument, "row {} of tensor '{}' is out of range [0, {})", row, tensor.name, tensor.rows());
  }
  const std::uint64_t row_bytes = tensor.nbytes / static_cast<std::uint64_t>(tensor.rows());
  dequantize(tensor.type, tensor.data + static_cast<std::uint64_t>(row) * row_bytes, dst, tensor.shape[0]);
}

void dequantize_rows(const GgufTensor& tensor, std::int64_t first, std::int64_t count, float* dst) {
  if (first < 0 || count < 0 || first > tensor.rows() - count) {
    fail(ErrorCode::invalid_argument, "rows [{}, {}) of tensor '{}' are out of range [0, {})", first, first + count,
         tensor.name, tensor.rows());
  }
  const std::uint64_t row_bytes = tensor.nbytes / static_cast<std::uint64_t>(tensor.rows());
  dequantize(tensor.type, tensor.data + static_cast<std::uint64_t>(first) * row_bytes, dst, count * tensor.shape[0]);
}

std::vector<float> dequantize_stacked(std::initializer_list<const GgufTensor*> tensors) {
  std::vector<float> w;
  dequantize_stacked(tensors, w);
  return w;
}

void dequantize_stacked(std::initializer_list<const GgufTensor*> tensors, std::vector<float>& out) {
  std::int64_t elements = 0;
  for (const auto* t : tensors) elements += t->numel();
  out.resize(static_cast<std::size_t>(elements));  // keeps its capacity when it shrinks
  float* dst = out.data();
  for (const auto* t : tensors) {
    dequantize(t->type, t->data, dst, t->numel());
    dst += t->numel();
  }
}

std::vector<float> dequantize_vector(const GgufTensor* tensor, std::int64_t size) {
  std::vector<float> v(static_cast<std::size_t>(size), 0.0f);
  if (tensor != nullptr) {
    if (tensor->numel() != size)
      fail(ErrorCode::invalid_model, "tensor {} has {} values, expected {}", tensor->name, tensor->numel(), size);
    dequantize(tensor->type, tensor->data, v.data(), tensor->numel());
  }
  return v;
}

}  // namespace ember::model
