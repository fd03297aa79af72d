#include "backend/cuda/cuda_ops.hpp"

#include "util/check.hpp"

#include <algorithm>

namespace ember::backend::cuda {

namespace k = ember::kernels::cuda;

CudaOps::CudaOps(const CudaModel& model, int device, Precision precision, cudaStream_t stream, k::Blas& blas)
    : config_(*model.config),
      weights_(*model.weights),
      token_embd_(*model.token_embd),
      rope_freq_factors_(*model.rope_freq_factors),
      device_(device),
      precision_(precision),
      stream_(stream),
      blas_(blas),
      q_dim_(std::int64_t{config_.heads} * config_.head_dim),
      kv_dim_(std::int64_t{config_.kv_heads} * config_.head_dim) {}

bool CudaOps::reserve(std::int64_t rows, std::int64_t meta_ints) {
  if (rows <= scratch_.rows && meta_ints <= scratch_.meta_ints) return false;
  rows = std::max(rows, scratch_.rows);
  meta_ints = std::max(meta_ints, scratch_.meta_ints);
  const std::int64_t d = config_.embedding, ffn = config_.ffn;
  const std::int64_t widest_in = std::max({d, q_dim_, ffn});
  const std::int64_t widest_out = std::max({q_dim_ + 2 * kv_dim_, 2 * ffn, static_cast<std::int64_t>(config_.vocab)});
  auto f32 = [&](std::int64_t n, const char* what) {
    return DeviceBuffer(device_, static_cast<std::size_t>(rows * n) * sizeof(float), what);
  };
  scratch_ = {};  // free the old buffers before allocating the new ones
  Scratch s;
  s.rows = rows;
  s.meta_ints = meta_ints;
  s.meta = DeviceBuffer(device_, static_cast<std::size_t>(meta_ints) * sizeof(std::int32_t), "batch metadata");
  s.x = f32(d, "activations");
  s.h = f32(d, "activations");
  s.qkv = f32(q_dim_ + 2 * kv_dim_, "activations");
  s.attn = f32(std::max(q_dim_, d), "activations");
  s.gate_up = f32(2 * ffn, "activations");
  s.act = f32(ffn, "activations");
  for (int set = 0; set < (config_.uniform_rope() ? 1 : 2); ++set) {
    s.cos[set] = f32(config_.rope_dims / 2, "rope angles");
    s.sin[set] = f32(config_.rope_dims / 2, "rope angles");
  }
  s.logits = f32(config_.vocab, "logits");
  if (precision_ == Precision::int8) {
    s.xq = DeviceBuffer(device_, static_cast<std::size_t>(rows * widest_in), "quantized activations");
    s.xs = f32(1, "activation scales");
    s.acc = DeviceBuffer(device_, static_cast<std::size_t>(rows * widest_out) * sizeof(std::int32_t), "GEMM output");
  } else {
    s.xh =
        DeviceBuffer(device_, static_cast<std::size_t>(rows * widest_in) * sizeof(std::uint16_t), "FP16 activations");
  }
  scratch_ = std::move(s);
  return true;
}

void CudaOps::begin(std::int64_t rows, std::int64_t n_out, const KvCache& kv) {
  const KvGeometry& g = kv.geometry();
  step_ = {rows, n_out, &kv, MetaLayout(rows, n_out), {g.block_size, config_.kv_heads, config_.head_dim, g.dtype}};
}

// y = x * W^T (+ y when accumulate), x [m, in] on the device.
void CudaOps::linear(const DeviceLinear& l, const float* x, std::int64_t m, float* y, bool accumulate) {
  if (precision_ == Precision::int8) {
    k::quantize_rows_s8(x, m, l.in, scratch_.xq.as<std::int8_t>(), scratch_.xs.as<float>(), stream_);
    if (m <= k::kMaxGemvRows) {  // decode: the fused GEMV, bit-identical to the GEMM below
      k::gemv_s8(scratch_.xq.as<std::int8_t>(), scratch_.xs.as<float>(), l.weights.as<std::int8_t>(),
                 l.scales.as<float>(), m, l.out, l.in, y, accumulate, stream_);
      return;
    }
    k::gemm_s8(blas_, scratch_.xq.as<std::int8_t>(), l.weights.as<std::int8_t>(), m, l.out, l.in,
               scratch_.acc.as<std::int32_t>());
    k::dequantize_s32(scratch_.acc.as<std::int32_t>(), scratch_.xs.as<float>(), l.scales.as<float>(), m, l.out, y,
                      accumulate, stream_);
  } else {
    k::to_f16(x, m * l.in, scratch_.xh.as<std::uint16_t>(), stream_);
    k::gemm_f16(blas_, scratch_.xh.as<std::uint16_t>(), l.weights.as<std::uint16_t>(), m, l.out, l.in, y, accumulate);
  }
}

float* CudaOps::at(model::Activation a) const {
  switch (a) {
    case model::Activation::x: return scratch_.x.as<float>();
    case model::Activation::h: return scratch_.h.as<float>();
    case model::Activation::qkv: return scratch_.qkv.as<float>();
    case model::Activation::attn:
    case model::Activation::logit_input: return scratch_.attn.as<float>();  // free after the layers
    case model::Activation::gate_up: return scratch_.gate_up.as<float>();
    case model::Activation::act: return scratch_.act.as<float>();
    case model::Activation::logits: return scratch_.logits.as<float>();
  }
  return nullptr;
}

float* CudaOps::part(model::QkvPart p) const {
  return at(model::Activation::qkv) + (p == model::QkvPart::q ? 0 : q_dim_);
}

void CudaOps::missing(const char* op) const {
  fail(ErrorCode::unsupported, "CUDA backend: {} is not implemented for architecture '{}'", op, config_.architecture);
}

void CudaOps::embed(float scale) {
  float* x = at(model::Activation::x);
  k::gather_rows(token_embd_.as<float>(), meta(step_.at.tokens), step_.rows, config_.embedding, x, stream_);
  if (scale != 1.0f) k::scale(x, step_.rows * config_.embedding, scale, stream_);
}

void CudaOps::rope_angles(model::RopeAngleSet set, float base, float position_scale) {
  const auto i = static_cast<std::size_t>(set);
  k::rope_angles(meta(step_.at.positions), step_.rows, config_.rope_dims, base, rope_freq_factors_.as<float>(),
                 position_scale, scratch_.cos[i].as<float>(), scratch_.sin[i].as<float>(), stream_);
}

void CudaOps::rmsnorm(model::WeightRef weight, model::Activation in, model::Activation out, std::int64_t rows) {
  k::rmsnorm(at(in), weights_[weight].values.as<float>(), rows, config_.embedding, config_.rms_eps, at(out), stream_);
}

void CudaOps::rmsnorm_heads(model::WeightRef weight, model::QkvPart p) {
  const int heads = p == model::QkvPart::q ? config_.heads : config_.kv_heads;
  k::rmsnorm_heads(part(p), step_.rows, q_dim_ + 2 * kv_dim_, heads, config_.head_dim,
                   weights_[weight].values.as<float>(), config_.rms_eps, stream_);
}

void CudaOps::linear(model::WeightRef weight, model::Activation in, model::Activation out, std::int64_t rows,
                     bool accumulate) {
  linear(weights_[weight].linear, at(in), rows, at(out), accumulate);
}

void CudaOps::linear_outputs(model::WeightRef weight, model::Activation in, model::Activation out, std::int64_t rows,
                             std::int64_t begin, std::int64_t end, bool accumulate) {
  const DeviceLinear& l = weights_[weight].linear;
  if (begin != 0 || end != l.out) missing("a linear in pieces");
  linear(l, at(in), rows, at(out), accumulate);
}

void CudaOps::add_bias(model::WeightRef bias, model::Activation a) {
  EMBER_ASSERT(a == model::Activation::qkv);
  k::add_bias(at(a), step_.rows, q_dim_ + 2 * kv_dim_, weights_[bias].values.as<float>(), stream_);
}

// Post-norms add a normed product into the residual stream x, [rows, embedding] both.
void CudaOps::add(model::Activation from, model::Activation into) {
  EMBER_ASSERT(into == model::Activation::x);
  k::add(at(from), at(into), step_.rows * config_.embedding, stream_);
}

void CudaOps::rope(model::QkvPart p, model::RopeAngleSet set) {
  const int heads = p == model::QkvPart::q ? config_.heads : config_.kv_heads;
  const auto i = static_cast<std::size_t>(set);
  k::rope(part(p), step_.rows, q_dim_ + 2 * kv_dim_, heads, config_.head_dim, config_.rope_dims,
          scratch_.cos[i].as<float>(), scratch_.sin[i].as<float>(), config_.rope_layout, stream_);
}

void CudaOps::store_kv(int layer) {
  k::store_kv(part(model::QkvPart::k), part(model::QkvPart::k) + kv_dim_, q_dim_ + 2 * kv_dim_, step_.rows,
              meta(step_.at.slots), step_.layout, step_.kv->keys(layer), step_.kv->values(layer), stream_);
}

void CudaOps::attention(int layer, int window, float scale, std::int64_t row_begin, std::int64_t row_end) {
  if (row_begin != 0 || row_end != step_.rows) missing("attention in pieces");
  k::paged_attention(part(model::QkvPart::q), q_dim_ + 2 * kv_dim_, meta(step_.at.positions), meta(step_.at.row_tables),
                     meta(step_.at.block_tables), step_.rows, config_.heads, step_.layout, step_.kv->keys(layer),
                     step_.kv->values(layer), window, scale, at(model::Activation::attn), q_dim_, stream_);
}

void CudaOps::gated_activation(model::FeedForward kind) {
  if (kind == model::FeedForward::geglu)
    k::gelu_mul(at(model::Activation::gate_up), step_.rows, config_.ffn, at(model::Activation::act), stream_);
  else
    k::silu_mul(at(model::Activation::gate_up), step_.rows, config_.ffn, at(model::Activation::act), stream_);
}

void CudaOps::gather_logit_rows() {
  k::gather_rows(at(model::Activation::x), meta(step_.at.logit_rows), step_.n_out, config_.embedding,
                 at(model::Activation::logit_input), stream_);
}

}  // namespace ember::backend::cuda
