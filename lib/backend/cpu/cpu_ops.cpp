#include "backend/cpu/cpu_ops.hpp"

#include "util/check.hpp"

#include <algorithm>
#include <utility>

namespace ember::backend::cpu {

namespace k = ember::kernels::cpu;
using model::Activation;

CpuOps::CpuOps(const model::ModelConfig& config, const CpuWeights& weights, const model::GgufTensor& token_embd,
               k::CpuContext& ctx, LinearInputObserver* observer)
    : config_(config),
      weights_(weights),
      token_embd_(token_embd),
      ctx_(ctx),
      observer_(observer),
      q_dim_(std::int64_t{config.heads} * config.head_dim),
      kv_dim_(std::int64_t{config.kv_heads} * config.head_dim),
      qkv_dim_(q_dim_ + 2 * kv_dim_) {}

void CpuOps::begin(const Batch& batch, KvCache& kv, std::vector<float>* logits, std::vector<float>* hidden) {
  const KvGeometry& g = kv.geometry();
  batch_ = &batch;
  kv_ = &kv;
  logits_ = logits;
  hidden_ = hidden;
  rows_ = batch.rows();
  resize_scratch(rows_);
  if (logits_ != nullptr) logits_->resize(batch.logit_rows.size() * static_cast<std::size_t>(config_.vocab));
  if (!batch.hidden_rows.empty()) {
    EMBER_ASSERT(hidden_ != nullptr);
    hidden_->resize(batch.hidden_rows.size() * static_cast<std::size_t>(config_.embedding));
  }
  seqs_.clear();
  lora_ = false;
  for (const SequenceSlice& s : batch.sequences) lora_ |= !s.adapters.empty();
  if (lora_) {
    lora_sequence_.assign(static_cast<std::size_t>(rows_), -1);
    for (std::size_t i = 0; i < batch.sequences.size(); ++i) {
      const SequenceSlice& s = batch.sequences[i];
      if (!s.adapters.empty())
        std::fill_n(lora_sequence_.begin() + s.row_begin, s.row_count, static_cast<std::int32_t>(i));
    }
  }
  for (const SequenceSlice& s : batch.sequences)
    seqs_.push_back({s.row_begin, s.row_count, s.block_table.data(), static_cast<std::int32_t>(s.block_table.size())});
  if (!config_.causal) {
    last_positions_.assign(batch.positions.begin(), batch.positions.end());
    for (const SequenceSlice& s : batch.sequences)
      for (std::int32_t r = s.row_begin; r < s.row_begin + s.row_count; ++r)
        last_positions_[static_cast<std::size_t>(r)] =
            batch.positions[static_cast<std::size_t>(s.row_begin + s.row_count - 1)];
  }
  layout_ = {g.block_size, config_.kv_heads, config_.head_dim, g.dtype};
}

float* CpuOps::at(Activation a) {
  switch (a) {
    case Activation::x: return x_.data();
    case Activation::h: return h_.data();
    case Activation::qkv: return qkv_.data();
    case Activation::attn: return attn_.data();
    case Activation::gate_up: return gate_up_.data();
    case Activation::act: return act_.data();
    case Activation::logit_input: return attn_.data();  // free once the last layer has run
    case Activation::logits: EMBER_ASSERT(logits_ != nullptr); return logits_->data();
  }
  return nullptr;
}

const float* CpuOps::data(Activation a) const { return const_cast<CpuOps*>(this)->at(a); }

std::int64_t CpuOps::width(Activation a) const {
  switch (a) {
    case Activation::x:
    case Activation::h:
    case Activation::logit_input: return config_.embedding;
    case Activation::qkv: return qkv_dim_;
    case Activation::attn: return q_dim_;
    case Activation::gate_up: return config_.gate_up_rows();
    case Activation::act: return config_.ffn;
    case Activation::logits: return config_.vocab;
  }
  return 0;
}

float* CpuOps::part(model::QkvPart p) { return qkv_.data() + (p == model::QkvPart::q ? 0 : q_dim_); }

void CpuOps::embed(float scale) {
  const std::int64_t d = config_.embedding;
  for (std::int64_t r = 0; r < rows_; ++r)
    model::dequantize_row(token_embd_, batch_->tokens[static_cast<std::size_t>(r)], x_.data() + r * d);
  if (scale != 1.0f)
    for (std::int64_t i = 0; i < rows_ * d; ++i) x_[static_cast<std::size_t>(i)] *= scale;
}

void CpuOps::rope_angles(model::RopeAngleSet set, float base, float position_scale) {
  const float* factors = config_.rope_freq_factors.empty() ? nullptr : config_.rope_freq_factors.data();
  angles_[static_cast<std::size_t>(set)] =
      k::rope_angles(batch_->positions.data(), rows_, config_.rope_dims, base, factors, position_scale);
}

void CpuOps::rmsnorm(model::WeightRef weight, Activation in, Activation out, std::int64_t rows) {
  k::rmsnorm(at(in), weights_[weight].values.data(), rows, config_.embedding, config_.rms_eps, at(out), ctx_.threads);
}

void CpuOps::rmsnorm_heads(model::WeightRef weight, model::QkvPart p) {
  int heads = p == model::QkvPart::q ? config_.heads : config_.kv_heads;
  int width = config_.head_dim;
  if (config_.qk_norm_whole) width *= std::exchange(heads, 1);  // OLMoE: all of q (or k) as one head
  k::rmsnorm_heads(part(p), rows_, qkv_dim_, heads, width, weights_[weight].values.data(), config_.rms_eps,
                   ctx_.threads);
}

void CpuOps::layer_norm(model::WeightRef weight, model::WeightRef bias, Activation in, Activation out,
                        std::int64_t rows) {
  k::layer_norm(at(in), weights_[weight].values.data(), weights_[bias].values.data(), rows, config_.embedding,
                config_.rms_eps, at(out), ctx_.threads);
}

void CpuOps::add_position_embeddings(model::WeightRef positions, model::WeightRef types) {
  const std::int64_t d = config_.embedding;
  const std::vector<float>& table = weights_[positions].values;
  const std::vector<float>& type_rows = weights_[types].values;  // empty: the file has none
  const auto table_rows = static_cast<std::int64_t>(table.size()) / d;
  for (std::int64_t r = 0; r < rows_; ++r) {
    const std::int64_t p = batch_->positions[static_cast<std::size_t>(r)];
    if (p < 0 || p >= table_rows)
      fail(ErrorCode::context_overflow, "position {} is past the model's {} position embeddings", p, table_rows);
    float* x = x_.data() + r * d;
    const float* row = table.data() + p * d;
    for (std::int64_t i = 0; i < d; ++i) x[i] += row[i];
    if (!type_rows.empty())
      for (std::int64_t i = 0; i < d; ++i) x[i] += type_rows[static_cast<std::size_t>(i)];
  }
}

void CpuOps::write_hidden(Activation from) {
  EMBER_ASSERT(hidden_ != nullptr);
  const auto d = static_cast<std::size_t>(config_.embedding);
  const float* first = at(from) + batch_->logit_rows.size() * d;  // after the logit rows (gather_logit_rows)
  std::copy(first, first + batch_->hidden_rows.size() * d, hidden_->data());
}

void CpuOps::linear(model::WeightRef weight, Activation in, Activation out, std::int64_t rows, bool accumulate) {
  if (observer_ != nullptr) observer_->observe(weight, at(in), rows, width(in));
  weights_[weight].linear->forward(ctx_, at(in), rows, at(out), accumulate);
  if (lora_) apply_lora(weight, in, out, rows, 0, width(out));
}

void CpuOps::linear_outputs(model::WeightRef weight, Activation in, Activation out, std::int64_t rows,
                            std::int64_t begin, std::int64_t end, bool accumulate) {
  // A part after the first is the next of the same product (DecoderOps::linear_outputs).
  const auto input = begin > 0 ? k::LinearInput::as_before : k::LinearInput::fresh;
  weights_[weight].linear->forward_outputs(ctx_, at(in), rows, at(out), begin, end, accumulate, input);
  if (lora_) apply_lora(weight, in, out, rows, begin, end);
}

void CpuOps::add_bias(model::WeightRef bias, Activation a) {
  const std::vector<float>& b = weights_[bias].values;
  const std::int64_t n = width(a);
  float* y = at(a);
  for (std::int64_t r = 0; r < rows_; ++r)
    for (std::int64_t i = 0; i < n; ++i) y[r * n + i] += b[static_cast<std::size_t>(i)];
}

void CpuOps::add(Activation from, Activation into) {
  const float* src = at(from);
  float* dst = at(into);
  for (std::int64_t i = 0; i < rows_ * width(into); ++i) dst[i] += src[i];
}

void CpuOps::rope(model::QkvPart p, model::RopeAngleSet set) {
  const int heads = p == model::QkvPart::q ? config_.heads : config_.kv_heads;
  k::rope(part(p), rows_, qkv_dim_, heads, config_.head_dim, angles_[static_cast<std::size_t>(set)],
          config_.rope_layout, ctx_.threads);
}

void CpuOps::store_kv(int layer) {
  k::store_kv(part(model::QkvPart::k), part(model::QkvPart::k) + kv_dim_, qkv_dim_, rows_, batch_->slots.data(),
              layout_, kv_->keys(layer), kv_->values(layer));
}

void CpuOps::attention(int layer, int window, float scale, std::int64_t row_begin, std::int64_t row_end) {
  const std::vector<k::AttentionSeq>* seqs = &seqs_;
  if (row_begin > 0 || row_end < rows_) {  // the sequences' rows within [row_begin, row_end)
    seq_rows_.clear();
    for (const k::AttentionSeq& s : seqs_) {
      const auto begin = static_cast<std::int32_t>(std::max<std::int64_t>(s.row_begin, row_begin));
      const auto end = static_cast<std::int32_t>(std::min<std::int64_t>(s.row_begin + s.row_count, row_end));
      if (begin < end) seq_rows_.push_back({begin, end - begin, s.block_table, s.block_count});
    }
    seqs = &seq_rows_;
  }
  const std::int32_t* positions = config_.causal ? batch_->positions.data() : last_positions_.data();
  k::paged_attention(part(model::QkvPart::q), qkv_dim_, positions, seqs->data(), static_cast<int>(seqs->size()),
                     config_.heads, layout_, kv_->keys(layer), kv_->values(layer), attn_.data(), q_dim_, ctx_,
                     attention_, {.window = window, .scale = scale});
}

void CpuOps::gated_activation(model::FeedForward kind) {
  if (kind == model::FeedForward::gelu)
    k::gelu(gate_up_.data(), rows_, config_.ffn, act_.data(), ctx_.threads);
  else if (kind == model::FeedForward::geglu)
    k::gelu_mul(gate_up_.data(), rows_, config_.ffn, act_.data(), ctx_.threads);
  else
    k::silu_mul(gate_up_.data(), rows_, config_.ffn, act_.data(), ctx_.threads);
}

std::int64_t CpuOps::output_granule(model::WeightRef weight, std::int64_t rows) const {
  return weights_[weight].linear->output_granule(rows);
}

void CpuOps::gather_logit_rows() {
  const std::int64_t d = config_.embedding;
  float* dst = at(Activation::logit_input);
  for (const std::vector<std::int32_t>* rows : {&batch_->logit_rows, &batch_->hidden_rows})
    for (const std::int32_t r : *rows) {
      const float* src = x_.data() + r * d;
      dst = std::copy(src, src + d, dst);
    }
}

// Scratch grows to the largest batch seen and is reused: no allocation per step.
void CpuOps::resize_scratch(std::int64_t rows) {
  const auto grow = [](std::vector<float>& v, std::int64_t n) {
    if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
  };
  const std::int64_t d = config_.embedding;
  grow(x_, rows * d);
  grow(h_, rows * d);
  grow(qkv_, rows * qkv_dim_);
  grow(attn_, rows * std::max(q_dim_, d));  // attn, then the logit rows of x
  grow(gate_up_, rows * config_.gate_up_rows());
  grow(act_, rows * config_.ffn);
}

}  // namespace ember::backend::cpu
