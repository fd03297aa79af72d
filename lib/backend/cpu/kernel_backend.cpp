#include "backend/cpu/kernel_backend.hpp"

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/context.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/ops.hpp"
#include "model/llama_weights.hpp"
#include "util/check.hpp"


#include <vector>

namespace ember::backend::cpu {
namespace {

namespace k = ember::kernels::cpu;

// Dequantizes one or more GGUF matrices with the same input width and stacks their rows: the
// fused Q|K|V and gate|up projections are a single GEMM each (one activation quantization, one
// pass over the input instead of three or two).
std::vector<float> stacked_rows(std::initializer_list<const model::GgufTensor*> tensors,
                                std::int64_t& out_rows) {
  out_rows = 0;
  for (const auto* t : tensors) out_rows += t->rows();
  std::vector<float> w(static_cast<std::size_t>(out_rows * (*tensors.begin())->shape[0]));
  float* dst = w.data();
  for (const auto* t : tensors) {
    model::dequantize(t->type, t->data, dst, t->numel());
    dst += t->numel();
  }
  return w;
}

std::vector<float> load_vector(const model::GgufTensor* t, std::int64_t size) {
  std::vector<float> v(static_cast<std::size_t>(size), 0.0f);
  if (t != nullptr) model::dequantize(t->type, t->data, v.data(), t->numel());
  return v;
}

struct Layer {
  std::vector<float> attn_norm, ffn_norm, qkv_bias;  // qkv_bias empty unless the model has one
  std::unique_ptr<k::Linear> qkv, wo, gate_up, down;
};

class KernelBackend final : public Backend {
 public:
  KernelBackend(std::shared_ptr<const model::GgufFile> file, const model::ModelConfig& config,
                const BackendOptions& options, GemmPrecision gemm)
      : file_(std::move(file)), config_(config), ctx_(options.threads), gemm_(gemm) {
    const model::LlamaWeights w = model::map_llama_weights(*file_, config_);
    const std::int64_t d = config_.embedding;
    q_dim_ = config_.heads * config_.head_dim;
    kv_dim_ = config_.kv_heads * config_.head_dim;
    token_embd_ = w.token_embd;
    output_norm_ = load_vector(w.output_norm, d);
    for (std::size_t l = 0; l < w.layers.size(); ++l) {
      const model::LayerWeights& lw = w.layers[l];
      Layer layer;
      layer.attn_norm = load_vector(lw.attn_norm, d);
      layer.ffn_norm = load_vector(lw.ffn_norm, d);
      if (lw.bq != nullptr) {
        layer.qkv_bias = load_vector(lw.bq, q_dim_);
        const auto bk = load_vector(lw.bk, kv_dim_), bv = load_vector(lw.bv, kv_dim_);
        layer.qkv_bias.insert(layer.qkv_bias.end(), bk.begin(), bk.end());
        layer.qkv_bias.insert(layer.qkv_bias.end(), bv.begin(), bv.end());
      }
      std::int64_t rows = 0;
      auto qkv = stacked_rows({lw.wq, lw.wk, lw.wv}, rows);
      layer.qkv = make_linear(qkv, rows, d);
      auto wo = stacked_rows({lw.wo}, rows);
      layer.wo = make_linear(wo, rows, q_dim_);
      auto gate_up = stacked_rows({lw.w_gate, lw.w_up}, rows);
      layer.gate_up = make_linear(gate_up, rows, d);
      auto down = stacked_rows({lw.w_down}, rows);
      layer.down = make_linear(down, rows, config_.ffn);
      layers_.push_back(std::move(layer));
      if (options.on_progress) options.on_progress(static_cast<float>(l + 1) / (w.layers.size() + 1));
    }
    std::int64_t rows = 0;
    auto output = stacked_rows({w.output}, rows);
    lm_head_ = make_linear(output, rows, d);
    if (options.on_progress) options.on_progress(1.0f);
  }

  const model::ModelConfig& config() const override { return config_; }
  std::string name() const override {
    return gemm_ == GemmPrecision::int8 ? "cpu-int8" : "cpu-fp32-kernels";
  }

  void forward(const Batch& batch, KvCache& kv, std::vector<float>& logits) override {
    const KvGeometry& g = kv.geometry();
    validate_batch(batch, g.block_count, g.block_size, config_.vocab);
    k::bind_threads(ctx_);  // this thread's OpenMP regions, oneDNN's included
    const std::int64_t rows = batch.rows(), d = config_.embedding, qkv_dim = q_dim_ + 2 * kv_dim_;
    resize_scratch(rows);

    for (std::int64_t r = 0; r < rows; ++r)
      model::dequantize_row(*token_embd_, batch.tokens[static_cast<std::size_t>(r)], x_.data() + r * d);

    seqs_.clear();
    for (const SequenceSlice& s : batch.sequences)
      seqs_.push_back({s.row_begin, s.row_count, s.block_table.data(),
                       static_cast<std::int32_t>(s.block_table.size())});
    const k::KvLayout layout{g.block_size, config_.kv_heads, config_.head_dim,
                             g.type == KvCacheType::f16 ? k::KvDType::f16 : k::KvDType::f32};
    const auto rope_layout = config_.rope_layout == model::RopeLayout::interleaved
                                 ? k::RopeLayout::interleaved : k::RopeLayout::half;
    const std::int32_t* positions = batch.positions.data();

    for (std::size_t l = 0; l < layers_.size(); ++l) {
      Layer& layer = layers_[l];
      k::rmsnorm(x_.data(), layer.attn_norm.data(), rows, d, config_.rms_eps, h_.data(), ctx_.threads);
      layer.qkv->forward(ctx_, h_.data(), rows, qkv_.data());
      if (!layer.qkv_bias.empty()) add_row_bias(qkv_.data(), rows, layer.qkv_bias);
      float* q = qkv_.data();
      float* kk = q + q_dim_;
      float* v = kk + kv_dim_;
      k::rope(q, rows, qkv_dim, config_.heads, config_.head_dim, config_.rope_dims, positions,
              config_.rope_base, rope_layout, ctx_.threads);
      k::rope(kk, rows, qkv_dim, config_.kv_heads, config_.head_dim, config_.rope_dims, positions,
              config_.rope_base, rope_layout, ctx_.threads);
      void* k_cache = kv.keys(static_cast<int>(l));
      void* v_cache = kv.values(static_cast<int>(l));
      k::store_kv(kk, v, qkv_dim, rows, batch.slots.data(), layout, k_cache, v_cache);
      k::paged_attention(q, qkv_dim, positions, seqs_.data(), static_cast<int>(seqs_.size()),
                         config_.heads, layout, k_cache, v_cache, attn_.data(), q_dim_, ctx_);
      layer.wo->forward(ctx_, attn_.data(), rows, x_.data(), /*accumulate=*/true);

      k::rmsnorm(x_.data(), layer.ffn_norm.data(), rows, d, config_.rms_eps, h_.data(), ctx_.threads);
      layer.gate_up->forward(ctx_, h_.data(), rows, gate_up_.data());
      k::silu_mul(gate_up_.data(), rows, config_.ffn, act_.data(), ctx_.threads);
      layer.down->forward(ctx_, act_.data(), rows, x_.data(), /*accumulate=*/true);
    }

    // Only the rows that need logits go through the final norm and the vocabulary projection.
    const std::int64_t n_out = static_cast<std::int64_t>(batch.logit_rows.size());
    for (std::int64_t i = 0; i < n_out; ++i) {
      const float* src = x_.data() + batch.logit_rows[static_cast<std::size_t>(i)] * d;
      std::copy(src, src + d, attn_.data() + i * d);  // attn_ is free scratch now
    }
    k::rmsnorm(attn_.data(), output_norm_.data(), n_out, d, config_.rms_eps, h_.data(), ctx_.threads);
    logits.resize(static_cast<std::size_t>(n_out * config_.vocab));
    if (n_out > 0) lm_head_->forward(ctx_, h_.data(), n_out, logits.data());
  }

 private:
  std::unique_ptr<k::Linear> make_linear(const std::vector<float>& w, std::int64_t out, std::int64_t in) {
    return gemm_ == GemmPrecision::int8 ? k::make_int8_linear(ctx_, w.data(), out, in)
                                        : k::make_fp32_linear(ctx_, w.data(), out, in);
  }

  void add_row_bias(float* y, std::int64_t rows, const std::vector<float>& bias) const {
    const std::int64_t n = static_cast<std::int64_t>(bias.size());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < n; ++i) y[r * n + i] += bias[static_cast<std::size_t>(i)];
  }

  // Scratch grows to the largest batch seen and is reused: no allocation per step.
  void resize_scratch(std::int64_t rows) {
    auto grow = [](std::vector<float>& v, std::int64_t n) {
      if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
    };
    const std::int64_t d = config_.embedding;
    grow(x_, rows * d);
    grow(h_, rows * d);
    grow(qkv_, rows * (q_dim_ + 2 * kv_dim_));
    grow(attn_, rows * std::max<std::int64_t>(q_dim_, d));
    grow(gate_up_, rows * 2 * config_.ffn);
    grow(act_, rows * config_.ffn);
  }

  std::shared_ptr<const model::GgufFile> file_;  // keeps token_embd_ mapped
  model::ModelConfig config_;
  k::CpuContext ctx_;
  GemmPrecision gemm_;
  std::int64_t q_dim_ = 0, kv_dim_ = 0;
  const model::GgufTensor* token_embd_ = nullptr;
  std::vector<float> output_norm_;
  std::vector<Layer> layers_;
  std::unique_ptr<k::Linear> lm_head_;
  std::vector<float> x_, h_, qkv_, attn_, gate_up_, act_;
  std::vector<k::AttentionSeq> seqs_;
};

}  // namespace

std::unique_ptr<Backend> make_kernel_backend(std::shared_ptr<const model::GgufFile> file,
                                             const model::ModelConfig& config,
                                             const BackendOptions& options, GemmPrecision gemm) {
  return std::make_unique<KernelBackend>(std::move(file), config, options, gemm);
}

}  // namespace ember::backend::cpu
