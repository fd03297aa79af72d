#include "backend/cpu/kernel_backend.hpp"

#include "backend/cpu/smoothing.hpp"
#include "backend/cpu/weight_cache.hpp"

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/context.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/ops.hpp"
#include "model/llama_weights.hpp"
#include "util/check.hpp"


#include <filesystem>
#include <string_view>
#include <vector>

namespace ember::backend::cpu {
namespace {

namespace k = ember::kernels::cpu;

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
    progress_ = options.progress;
    std::unique_ptr<WeightCacheWriter> cache;
    if (gemm_ == GemmPrecision::int8 && !options.weight_cache_dir.empty()) {
      const WeightCacheFile file = weight_cache_file(options.weight_cache_dir, *file_, recipe(options));
      if (restore(file, w, options.log)) {
        progress_ = nullptr;
        return;
      }
      cache = std::make_unique<WeightCacheWriter>(file, options.log);
    }
    report(LoadPhase::weights, 0.0f);
    output_norm_ = model::dequantize_vector(w.output_norm, d);
    std::vector<Matrices> matrices(w.layers.size());
    for (std::size_t l = 0; l < w.layers.size(); ++l) {
      const model::LayerWeights& lw = w.layers[l];
      Layer layer;
      layer.attn_norm = model::dequantize_vector(lw.attn_norm, d);
      layer.ffn_norm = model::dequantize_vector(lw.ffn_norm, d);
      if (lw.bq != nullptr) {
        layer.qkv_bias = model::dequantize_vector(lw.bq, q_dim_);
        const auto bk = model::dequantize_vector(lw.bk, kv_dim_), bv = model::dequantize_vector(lw.bv, kv_dim_);
        layer.qkv_bias.insert(layer.qkv_bias.end(), bk.begin(), bk.end());
        layer.qkv_bias.insert(layer.qkv_bias.end(), bv.begin(), bv.end());
      }
      layers_.push_back(std::move(layer));
      matrices[l].qkv = model::dequantize_stacked({lw.wq, lw.wk, lw.wv});
      matrices[l].wo = model::dequantize_tensor(*lw.wo);
      matrices[l].gate_up = model::dequantize_stacked({lw.w_gate, lw.w_up});
      matrices[l].down = model::dequantize_tensor(*lw.w_down);
      report(LoadPhase::weights, static_cast<float>(l + 1) / w.layers.size());
    }
    std::vector<float> lm_head = model::dequantize_tensor(*w.output);

    if (gemm_ == GemmPrecision::int8 && !options.calibration_tokens.empty()) {
      // Observe the FP32 activations on the calibration text, then fold the smoothing factors
      // into the weights before they are quantized (backend/cpu/smoothing.hpp).
      build_linears(matrices, lm_head, GemmPrecision::fp32);
      const CalibrationRanges ranges = calibrate(options.calibration_tokens);
      smooth(ranges, matrices, lm_head);
    }
    if (cache) save_vectors(*cache);
    cache_ = cache.get();
    build_linears(matrices, lm_head, gemm_);
    cache_ = nullptr;
    if (cache) cache->commit();
    report(LoadPhase::cache, 1.0f);
    progress_ = nullptr;
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
    // The rotation angles depend only on the positions: once per step, not per layer.
    const k::RopeAngles angles = k::rope_angles(positions, rows, config_.rope_dims, config_.rope_base);

    for (std::size_t l = 0; l < layers_.size(); ++l) {
      Layer& layer = layers_[l];
      k::rmsnorm(x_.data(), layer.attn_norm.data(), rows, d, config_.rms_eps, h_.data(), ctx_.threads);
      if (observed_) observed_->layers[l].qkv_in.observe(h_.data(), rows, d);
      layer.qkv->forward(ctx_, h_.data(), rows, qkv_.data());
      if (!layer.qkv_bias.empty()) add_row_bias(qkv_.data(), rows, layer.qkv_bias);
      float* q = qkv_.data();
      float* kk = q + q_dim_;
      float* v = kk + kv_dim_;
      k::rope(q, rows, qkv_dim, config_.heads, config_.head_dim, angles, rope_layout, ctx_.threads);
      k::rope(kk, rows, qkv_dim, config_.kv_heads, config_.head_dim, angles, rope_layout, ctx_.threads);
      void* k_cache = kv.keys(static_cast<int>(l));
      void* v_cache = kv.values(static_cast<int>(l));
      k::store_kv(kk, v, qkv_dim, rows, batch.slots.data(), layout, k_cache, v_cache);
      k::paged_attention(q, qkv_dim, positions, seqs_.data(), static_cast<int>(seqs_.size()),
                         config_.heads, layout, k_cache, v_cache, attn_.data(), q_dim_, ctx_, attention_);
      if (observed_) observed_->layers[l].wo_in.observe(attn_.data(), rows, q_dim_);
      layer.wo->forward(ctx_, attn_.data(), rows, x_.data(), /*accumulate=*/true);

      k::rmsnorm(x_.data(), layer.ffn_norm.data(), rows, d, config_.rms_eps, h_.data(), ctx_.threads);
      if (observed_) observed_->layers[l].gate_up_in.observe(h_.data(), rows, d);
      layer.gate_up->forward(ctx_, h_.data(), rows, gate_up_.data());
      k::silu_mul(gate_up_.data(), rows, config_.ffn, act_.data(), ctx_.threads);
      if (observed_) observed_->layers[l].down_in.observe(act_.data(), rows, config_.ffn);
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
    if (observed_) observed_->lm_head_in.observe(h_.data(), n_out, d);
    if (n_out > 0) lm_head_->forward(ctx_, h_.data(), n_out, logits.data());
  }

 private:
  // The FP32 weights of one layer, row-major [out, in], kept only while loading.
  struct Matrices {
    std::vector<float> qkv, wo, gate_up, down;
  };

  void build_linears(const std::vector<Matrices>& m, const std::vector<float>& lm_head, GemmPrecision precision) {
    const std::int64_t d = config_.embedding, ffn = config_.ffn;
    // The FP32 linears of an INT8 backend exist only to calibrate on; the forward pass is the
    // other half of that phase.
    const bool for_calibration = precision != gemm_;
    const LoadPhase phase = for_calibration ? LoadPhase::calibration : LoadPhase::quantization;
    const float share = for_calibration ? 0.5f : 1.0f;
    report(phase, 0.0f);
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      layers_[l].qkv = make_linear(m[l].qkv, q_dim_ + 2 * kv_dim_, d, precision, layer_name(l, "qkv"));
      layers_[l].wo = make_linear(m[l].wo, d, q_dim_, precision, layer_name(l, "wo"));
      layers_[l].gate_up = make_linear(m[l].gate_up, 2 * ffn, d, precision, layer_name(l, "gate_up"));
      layers_[l].down = make_linear(m[l].down, d, ffn, precision, layer_name(l, "down"));
      report(phase, share * static_cast<float>(l + 1) / (layers_.size() + 1));
    }
    lm_head_ = make_linear(lm_head, config_.vocab, d, precision, "lm_head");
    report(phase, share);
  }

  CalibrationRanges calibrate(const std::vector<std::int32_t>& tokens) {
    const int n = static_cast<int>(tokens.size());
    KvGeometry g{config_.layers, config_.kv_heads, config_.head_dim, 16, (n + 15) / 16, KvCacheType::f32};
    KvCache kv(g);
    Batch batch;
    batch.sequences.push_back({0, n, {}});
    for (int i = 0; i < n; ++i) {
      batch.tokens.push_back(tokens[static_cast<std::size_t>(i)]);
      batch.positions.push_back(i);
      batch.slots.push_back(i);
      batch.logit_rows.push_back(i);
    }
    for (int b = 0; b < g.block_count; ++b) batch.sequences[0].block_table.push_back(b);
    CalibrationRanges ranges;
    ranges.layers.resize(layers_.size());
    observed_ = &ranges;
    std::vector<float> logits;
    forward(batch, kv, logits);
    observed_ = nullptr;
    report(LoadPhase::calibration, 1.0f);
    return ranges;
  }

  void smooth(const CalibrationRanges& r, std::vector<Matrices>& m, std::vector<float>& lm_head) {
    // Measured on the default model, 400 teacher-forced positions against llama.cpp, one INT8
    // term everywhere: no smoothing 87.0 % top-1 agreement, KL 0.032; alpha 0.3 / 0.4 / 0.5 /
    // 0.65 / 0.8: KL 0.021 / 0.016 / 0.015 / 0.018 / 0.028. The linears with two-term inputs
    // (activations_for) need no help with activation outliers, and a smaller alpha suits their
    // weights: over 1,464 positions against llama.cpp on F32 weights, alpha 0.3 / 0.35 / 0.4 /
    // 0.45 / 0.5 / 0.65 for them gave top-1 96.1 / 95.6 / 96.2 / 95.8 / 94.9 / 93.7 %, KL 0.0075 /
    // 0.0033 / 0.0071 / 0.0035 / 0.0039 / 0.0102 (KL hangs on a few positions, hence its jumps).
    const auto alpha_for = [](const char* linear) {
      return activations_for(linear) == k::ActivationQuant::residual ? 0.35f : 0.5f;
    };
    const std::int64_t d = config_.embedding, ffn = config_.ffn, qkv_rows = q_dim_ + 2 * kv_dim_;
    const int hd = config_.head_dim, group = config_.heads / config_.kv_heads;
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      Layer& layer = layers_[l];
      // Inputs that come out of an RMSNorm: its weight takes the 1/s.
      auto s = smoothing_factors(r.layers[l].qkv_in, m[l].qkv.data(), qkv_rows, d, alpha_for(".qkv"));
      scale_columns(m[l].qkv.data(), qkv_rows, d, s);
      divide(layer.attn_norm, s);
      s = smoothing_factors(r.layers[l].gate_up_in, m[l].gate_up.data(), 2 * ffn, d, alpha_for(".gate_up"));
      scale_columns(m[l].gate_up.data(), 2 * ffn, d, s);
      divide(layer.ffn_norm, s);
      // silu(gate) * up is linear in up: up's output rows take the 1/s of the down input.
      s = smoothing_factors(r.layers[l].down_in, m[l].down.data(), d, ffn, alpha_for(".down"));
      scale_columns(m[l].down.data(), d, ffn, s);
      for (std::int64_t j = 0; j < ffn; ++j)
        for (std::int64_t i = 0; i < d; ++i) m[l].gate_up[static_cast<std::size_t>((ffn + j) * d + i)] /= s[static_cast<std::size_t>(j)];
      // The attention output is linear in V: V's rows take the 1/s of the output projection's
      // input. Query heads sharing a KV head must share the factor (the largest of the group).
      s = smoothing_factors(r.layers[l].wo_in, m[l].wo.data(), d, q_dim_, alpha_for(".wo"));
      for (int kvh = 0; kvh < config_.kv_heads; ++kvh)
        for (int i = 0; i < hd; ++i) {
          float shared = 0;
          for (int h = kvh * group; h < (kvh + 1) * group; ++h) shared = std::max(shared, s[static_cast<std::size_t>(h * hd + i)]);
          for (int h = kvh * group; h < (kvh + 1) * group; ++h) s[static_cast<std::size_t>(h * hd + i)] = shared;
          const std::int64_t v_row = q_dim_ + kv_dim_ + kvh * hd + i;
          for (std::int64_t c = 0; c < d; ++c) m[l].qkv[static_cast<std::size_t>(v_row * d + c)] /= shared;
          if (!layer.qkv_bias.empty()) layer.qkv_bias[static_cast<std::size_t>(v_row)] /= shared;
        }
      scale_columns(m[l].wo.data(), d, q_dim_, s);
    }
    auto s = smoothing_factors(r.lm_head_in, lm_head.data(), config_.vocab, d, alpha_for("lm_head"));
    scale_columns(lm_head.data(), config_.vocab, d, s);
    divide(output_norm_, s);
  }

  std::unique_ptr<k::Linear> make_linear(const std::vector<float>& w, std::int64_t out, std::int64_t in,
                                         GemmPrecision precision, const std::string& name) {
    if (precision == GemmPrecision::fp32) return k::make_fp32_linear(ctx_, w.data(), out, in);
    const k::QuantizedWeights q = k::quantize_int8_weights(ctx_, w.data(), out, in);
    if (cache_ != nullptr) cache_->add_linear(name, out, in, q.q.data(), q.scales.data());
    return k::make_int8_linear(ctx_, q.q.data(), q.scales.data(), out, in, activations_for(name));
  }

  // Where one INT8 term per activation row loses too much, the input is quantized as two terms
  // (kernels/cpu/linear.hpp, ActivationQuant::residual). Measured on the default model, 1,464
  // teacher-forced positions against llama.cpp on the Q4_1 file (top-1 agreement, mean KL): one
  // term everywhere 92.4 %, 0.0116; two terms for the down projection and lm_head 94.1 %,
  // 0.0068; two terms everywhere 94.9 %, 0.0038 (what the INT8 weights alone leave) at twice
  // the prefill GEMM work. Against llama.cpp on F32 weights, two terms for down and lm_head:
  // 94.5 %, KL 0.0052; adding qkv: 94.9 %, 0.0039 (gate_up instead: 95.4 %, 0.0043, at three
  // times qkv's extra work; wo instead: 93.9 %, 0.0054). The down projection's input (the SwiGLU
  // product), the final norm's output and the attention norm's output carry the largest
  // outliers; lm_head runs on logit rows only and decode streams the weights once for both
  // terms, so the three cost about 40 % more prefill GEMM work and little else.
  static k::ActivationQuant activations_for(std::string_view linear_name) {
    const bool two_terms = linear_name.ends_with(".qkv") || linear_name.ends_with(".down") || linear_name == "lm_head";
    return two_terms ? k::ActivationQuant::residual : k::ActivationQuant::per_row;
  }

  // ---- the packed-weight cache (weight_cache.hpp) ----

  // Bump when the preparation (dequantize, smoothing, quantization) changes what it produces
  // without a change of ember's version: a cache written by the old code must not be read.
  static constexpr int kPreparationRevision = 2;

  std::string recipe(const BackendOptions& options) const {
    Hasher calibration;
    calibration.update(options.calibration_tokens.data(), options.calibration_tokens.size() * sizeof(std::int32_t));
    return fmt::format("cpu-int8 preparation {}, calibration {} tokens {:016x}", kPreparationRevision,
                       options.calibration_tokens.size(), calibration.value());
  }

  static std::string layer_name(std::size_t l, const char* what) { return fmt::format("blk.{}.{}", l, what); }

  void save_vectors(WeightCacheWriter& cache) const {
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      cache.add_vector(layer_name(l, "attn_norm"), layers_[l].attn_norm);
      cache.add_vector(layer_name(l, "ffn_norm"), layers_[l].ffn_norm);
      if (!layers_[l].qkv_bias.empty()) cache.add_vector(layer_name(l, "qkv_bias"), layers_[l].qkv_bias);
    }
    cache.add_vector("output_norm", output_norm_);
  }

  // Builds every prepared weight from the cache file; false (logged) when there is none or it
  // cannot be used, and the caller prepares the weights from the model instead.
  bool restore(const WeightCacheFile& file, const model::LlamaWeights& w, const LogCallback& log) {
    const auto say = [&](LogLevel level, const std::string& message) { if (log) log(level, message); };
    std::error_code ec;
    if (!std::filesystem::exists(file.path, ec)) {
      say(LogLevel::info, fmt::format("no weight cache at {}: preparing the weights and writing it", file.path));
      return false;
    }
    try {
      if (progress_) progress_->plan({{LoadPhase::cache, 1}});
      report(LoadPhase::cache, 0.0f);
      const WeightCacheReader cache(file);  // validated whole before anything is built
      const std::int64_t d = config_.embedding, ffn = config_.ffn;
      const auto linear = [&](const std::string& name, std::int64_t out, std::int64_t in) {
        const CachedLinear c = cache.linear(name, out, in);
        return k::make_int8_linear(ctx_, c.q, c.scales, out, in, activations_for(name));
      };
      layers_.resize(w.layers.size());
      for (std::size_t l = 0; l < layers_.size(); ++l) {
        Layer& layer = layers_[l];
        layer.attn_norm = cache.vector(layer_name(l, "attn_norm"), d);
        layer.ffn_norm = cache.vector(layer_name(l, "ffn_norm"), d);
        if (w.layers[l].bq != nullptr) layer.qkv_bias = cache.vector(layer_name(l, "qkv_bias"), q_dim_ + 2 * kv_dim_);
        layer.qkv = linear(layer_name(l, "qkv"), q_dim_ + 2 * kv_dim_, d);
        layer.wo = linear(layer_name(l, "wo"), d, q_dim_);
        layer.gate_up = linear(layer_name(l, "gate_up"), 2 * ffn, d);
        layer.down = linear(layer_name(l, "down"), d, ffn);
        report(LoadPhase::cache, static_cast<float>(l + 1) / (layers_.size() + 1));
      }
      output_norm_ = cache.vector("output_norm", d);
      lm_head_ = linear("lm_head", config_.vocab, d);
      report(LoadPhase::cache, 1.0f);
      say(LogLevel::info, fmt::format("weights read from the cache {}", file.path));
      return true;
    } catch (const Error& e) {
      if (e.code() == ErrorCode::cancelled) throw;
      say(LogLevel::warning, fmt::format("weight cache ignored, rewriting it: {}", e.what()));
      layers_.clear();
      lm_head_.reset();
      // The arena never frees single blocks: a fresh one, so the linears built before the
      // failure do not keep their memory (the old arena goes with its last user).
      ctx_.decode_weights = std::make_shared<k::WeightArena>();
      if (progress_) progress_->plan_preparation();
      return false;
    }
  }

  void report(LoadPhase phase, float fraction) const {
    if (progress_) progress_->report(phase, fraction);
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
  k::AttentionWorkspace attention_;
  CalibrationRanges* observed_ = nullptr;  // set only while calibrating
  LoadProgress* progress_ = nullptr;       // set only while loading
  WeightCacheWriter* cache_ = nullptr;     // set only while building the INT8 linears
};

}  // namespace

std::unique_ptr<Backend> make_kernel_backend(std::shared_ptr<const model::GgufFile> file,
                                             const model::ModelConfig& config,
                                             const BackendOptions& options, GemmPrecision gemm) {
  return std::make_unique<KernelBackend>(std::move(file), config, options, gemm);
}

}  // namespace ember::backend::cpu
