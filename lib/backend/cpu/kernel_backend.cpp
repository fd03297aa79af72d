#include "backend/cpu/kernel_backend.hpp"

#include "backend/cpu/memory_plan.hpp"
#include "backend/cpu/smoothing.hpp"
#include "backend/cpu/weight_cache.hpp"

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/context.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/ops.hpp"
#include "kernels/cpu/quantize.hpp"
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
  std::vector<float> q_norm, k_norm;                 // [head_dim]; empty unless qk_norm
  std::vector<float> post_attn_norm, post_ffn_norm;  // empty unless post_norms
  std::unique_ptr<k::Linear> qkv, wo, gate_up, down;
};

class KernelBackend final : public Backend {
 public:
  KernelBackend(std::shared_ptr<const model::GgufFile> file, const model::ModelConfig& config,
                const BackendOptions& options, GemmPrecision gemm)
      : file_(std::move(file)), config_(config), ctx_(options.threads), gemm_(gemm) {
    const model::LlamaWeights w = model::map_llama_weights(*file_, config_);
    check_fits(plan_memory(config_, gemm_), available_memory(), config_);
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
    prepare_weights(w, options.calibration_tokens, cache.get());
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
    const Step step = begin_step(batch, kv);
    for (std::size_t l = 0; l < layers_.size(); ++l) run_layer(l, step);

    // Only the rows that need logits go through the final norm and the vocabulary projection.
    const std::int64_t n_out = final_norm(batch.logit_rows);
    logits.resize(static_cast<std::size_t>(n_out * config_.vocab));
    if (n_out > 0) lm_head_->forward(ctx_, h_.data(), n_out, logits.data());
  }

 private:
  // What every layer of one step reads: the batch's rows, positions and KV slots, its
  // sequences' block tables (seqs_) and the rotation angles of its positions.
  struct Step {
    std::int64_t rows = 0;
    const std::int32_t* positions = nullptr;
    const std::int32_t* slots = nullptr;
    KvCache* kv = nullptr;
    k::KvLayout layout;
    k::RopeLayout rope_layout;
    k::RopeAngles angles;          // every layer's, or the global layers' (uniform_rope() false)
    k::RopeAngles sliding_angles;  // the sliding layers' when they turn by other angles
    const k::RopeAngles& for_layer(const model::ModelConfig& c, int layer) const {
      return !c.uniform_rope() && c.sliding(layer) ? sliding_angles : angles;
    }
  };

  // Embeds the batch's tokens into x_ and sets up what its layers share.
  Step begin_step(const Batch& batch, KvCache& kv) {
    const KvGeometry& g = kv.geometry();
    const std::int64_t rows = batch.rows(), d = config_.embedding;
    resize_scratch(rows);
    for (std::int64_t r = 0; r < rows; ++r)
      model::dequantize_row(*token_embd_, batch.tokens[static_cast<std::size_t>(r)], x_.data() + r * d);
    if (config_.embedding_scale != 1.0f)
      for (std::int64_t i = 0; i < rows * d; ++i) x_[static_cast<std::size_t>(i)] *= config_.embedding_scale;

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
    const float* factors = config_.rope_freq_factors.empty() ? nullptr : config_.rope_freq_factors.data();
    const auto angles_of = [&](float base, float position_scale) {
      return k::rope_angles(positions, rows, config_.rope_dims, base, factors, position_scale);
    };
    Step step{rows, positions, batch.slots.data(), &kv, layout, rope_layout,
              angles_of(config_.rope_base, config_.rope_position_scale()), {}};
    if (!config_.uniform_rope()) {
      const int sliding_layer = 0;  // every sliding layer turns alike
      step.sliding_angles = angles_of(config_.layer_rope_base(sliding_layer),
                                      config_.layer_rope_position_scale(sliding_layer));
    }
    return step;
  }

  // Layer l on x_ (the step's hidden states), in place.
  void run_layer(std::size_t l, const Step& step) {
    Layer& layer = layers_[l];
    const std::int64_t rows = step.rows, d = config_.embedding, qkv_dim = q_dim_ + 2 * kv_dim_;
    LayerRanges* observed = observed_ ? &observed_->layers[l] : nullptr;
    k::rmsnorm(x_.data(), layer.attn_norm.data(), rows, d, config_.rms_eps, h_.data(), ctx_.threads);
    if (observed) observed->qkv_in.observe(h_.data(), rows, d);
    layer.qkv->forward(ctx_, h_.data(), rows, qkv_.data());
    if (!layer.qkv_bias.empty()) add_row_bias(qkv_.data(), rows, layer.qkv_bias);
    float* q = qkv_.data();
    float* kk = q + q_dim_;
    float* v = kk + kv_dim_;
    if (config_.qk_norm) {
      k::rmsnorm_heads(q, rows, qkv_dim, config_.heads, config_.head_dim, layer.q_norm.data(), config_.rms_eps, ctx_.threads);
      k::rmsnorm_heads(kk, rows, qkv_dim, config_.kv_heads, config_.head_dim, layer.k_norm.data(), config_.rms_eps, ctx_.threads);
    }
    const k::RopeAngles& angles = step.for_layer(config_, static_cast<int>(l));
    k::rope(q, rows, qkv_dim, config_.heads, config_.head_dim, angles, step.rope_layout, ctx_.threads);
    k::rope(kk, rows, qkv_dim, config_.kv_heads, config_.head_dim, angles, step.rope_layout, ctx_.threads);
    void* k_cache = step.kv->keys(static_cast<int>(l));
    void* v_cache = step.kv->values(static_cast<int>(l));
    k::store_kv(kk, v, qkv_dim, rows, step.slots, step.layout, k_cache, v_cache);
    k::paged_attention(q, qkv_dim, step.positions, seqs_.data(), static_cast<int>(seqs_.size()),
                       config_.heads, step.layout, k_cache, v_cache, attn_.data(), q_dim_, ctx_, attention_,
                       {.window = config_.attention_window(static_cast<int>(l)), .scale = config_.attention_scale});
    if (observed) observed->wo_in.observe(attn_.data(), rows, q_dim_);
    residual_add(*layer.wo, attn_.data(), rows, layer.post_attn_norm);

    k::rmsnorm(x_.data(), layer.ffn_norm.data(), rows, d, config_.rms_eps, h_.data(), ctx_.threads);
    if (observed) observed->gate_up_in.observe(h_.data(), rows, d);
    layer.gate_up->forward(ctx_, h_.data(), rows, gate_up_.data());
    if (config_.feed_forward == model::FeedForward::geglu)
      k::gelu_mul(gate_up_.data(), rows, config_.ffn, act_.data(), ctx_.threads);
    else
      k::silu_mul(gate_up_.data(), rows, config_.ffn, act_.data(), ctx_.threads);
    if (observed) observed->down_in.observe(act_.data(), rows, config_.ffn);
    residual_add(*layer.down, act_.data(), rows, layer.post_ffn_norm);
  }

  // x_ += linear(in), or, with a post-norm (post_norms), x_ += rmsnorm(linear(in)).
  void residual_add(k::Linear& linear, const float* in, std::int64_t rows, const std::vector<float>& post_norm) {
    if (post_norm.empty()) {
      linear.forward(ctx_, in, rows, x_.data(), /*accumulate=*/true);
      return;
    }
    const std::int64_t d = config_.embedding;
    linear.forward(ctx_, in, rows, h_.data());
    k::rmsnorm(h_.data(), post_norm.data(), rows, d, config_.rms_eps, h_.data(), ctx_.threads);
    for (std::int64_t i = 0; i < rows * d; ++i) x_[static_cast<std::size_t>(i)] += h_[static_cast<std::size_t>(i)];
  }

  // The final norm of the rows `logit_rows` of x_ into h_ (the lm_head's input); their count.
  std::int64_t final_norm(const std::vector<std::int32_t>& logit_rows) {
    const std::int64_t n_out = static_cast<std::int64_t>(logit_rows.size()), d = config_.embedding;
    for (std::int64_t i = 0; i < n_out; ++i) {
      const float* src = x_.data() + logit_rows[static_cast<std::size_t>(i)] * d;
      std::copy(src, src + d, attn_.data() + i * d);  // attn_ is free scratch now
    }
    k::rmsnorm(attn_.data(), output_norm_.data(), n_out, d, config_.rms_eps, h_.data(), ctx_.threads);
    if (observed_) observed_->lm_head_in.observe(h_.data(), n_out, d);
    return n_out;
  }

  // The FP32 weights of one layer, row-major [out, in], kept only while that layer is prepared.
  struct Matrices {
    std::vector<float> qkv, wo, gate_up, down;
  };

  // The calibration text's forward pass, run a layer at a time while the weights are prepared.
  struct Calibration {
    Batch batch;
    std::unique_ptr<KvCache> kv;
    Step step;
    CalibrationRanges ranges;
  };

  // Prepares the weights one layer at a time, straight into their final layout: a layer's FP32
  // matrices live only while it is calibrated, smoothed and quantized, and the lm_head is
  // prepared a slice of rows at a time, so a load never holds more than one layer of the model
  // in FP32. The INT8 path calibrates each layer in FP32 on the calibration text's hidden
  // states and hands its output to the next layer: the activations a whole-model FP32 pass
  // observes, since smoothing a layer does not change what it computes.
  void prepare_weights(const model::LlamaWeights& w, const std::vector<std::int32_t>& calibration_tokens,
                       WeightCacheWriter* cache) {
    const std::int64_t d = config_.embedding;
    report(LoadPhase::weights, 0.0f);
    output_norm_ = model::dequantize_vector(w.output_norm, d);
    layers_.resize(w.layers.size());
    for (std::size_t l = 0; l < w.layers.size(); ++l) {
      const model::LayerWeights& lw = w.layers[l];
      Layer& layer = layers_[l];
      layer.attn_norm = model::dequantize_vector(lw.attn_norm, d);
      layer.ffn_norm = model::dequantize_vector(lw.ffn_norm, d);
      read_unsmoothed_norms(lw, layer);
      if (lw.bq != nullptr) {
        layer.qkv_bias = model::dequantize_vector(lw.bq, q_dim_);
        const auto bk = model::dequantize_vector(lw.bk, kv_dim_), bv = model::dequantize_vector(lw.bv, kv_dim_);
        layer.qkv_bias.insert(layer.qkv_bias.end(), bk.begin(), bk.end());
        layer.qkv_bias.insert(layer.qkv_bias.end(), bv.begin(), bv.end());
      }
    }
    std::unique_ptr<Calibration> calibration;
    if (gemm_ == GemmPrecision::int8 && !calibration_tokens.empty())
      calibration = begin_calibration(calibration_tokens);

    cache_ = cache;
    Matrices m;  // one layer's FP32 matrices, their memory reused by the next layer
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const model::LayerWeights& lw = w.layers[l];
      model::dequantize_stacked({lw.wq, lw.wk, lw.wv}, m.qkv);
      model::dequantize_stacked({lw.wo}, m.wo);
      model::dequantize_stacked({lw.w_gate, lw.w_up}, m.gate_up);
      model::dequantize_stacked({lw.w_down}, m.down);
      if (calibration) {
        build_layer(l, m, GemmPrecision::fp32);
        observed_ = &calibration->ranges;
        run_layer(l, calibration->step);
        observed_ = nullptr;
        smooth_layer(l, calibration->ranges.layers[l], m);
      }
      build_layer(l, m, gemm_);
      for (const model::GgufTensor* t : {lw.wq, lw.wk, lw.wv, lw.wo, lw.w_gate, lw.w_up, lw.w_down})
        file_->release(*t);
      report(LoadPhase::weights, static_cast<float>(l + 1) / (layers_.size() + 1));
    }
    m = {};  // before the lm_head's own buffers
    ChannelRange lm_head_in;
    if (calibration) {
      observed_ = &calibration->ranges;
      final_norm(calibration->batch.logit_rows);
      observed_ = nullptr;
      lm_head_in = std::move(calibration->ranges.lm_head_in);
      calibration.reset();
    }
    prepare_lm_head(*w.output, lm_head_in);
    // Tied or not, the embedding rows a step reads fault back in one page at a time.
    file_->release(*w.output);
    cache_ = nullptr;
    // The norms as smoothing left them.
    if (cache) save_vectors(*cache);
    report(LoadPhase::weights, 1.0f);
  }

  std::unique_ptr<Calibration> begin_calibration(const std::vector<std::int32_t>& tokens) {
    auto c = std::make_unique<Calibration>();
    const int n = static_cast<int>(tokens.size());
    const KvGeometry g{config_.layers, config_.kv_heads, config_.head_dim, 16, (n + 15) / 16, KvCacheType::f32};
    c->kv = std::make_unique<KvCache>(g);
    c->batch.sequences.push_back({0, n, {}});
    for (int i = 0; i < n; ++i) {
      c->batch.tokens.push_back(tokens[static_cast<std::size_t>(i)]);
      c->batch.positions.push_back(i);
      c->batch.slots.push_back(i);
      c->batch.logit_rows.push_back(i);
    }
    for (int b = 0; b < g.block_count; ++b) c->batch.sequences[0].block_table.push_back(b);
    validate_batch(c->batch, g.block_count, g.block_size, config_.vocab);
    k::bind_threads(ctx_);
    c->ranges.layers.resize(layers_.size());
    c->step = begin_step(c->batch, *c->kv);
    return c;
  }

  void build_layer(std::size_t l, const Matrices& m, GemmPrecision precision) {
    const std::int64_t d = config_.embedding, ffn = config_.ffn;
    Layer& layer = layers_[l];
    layer.qkv = make_linear(m.qkv, q_dim_ + 2 * kv_dim_, d, precision, layer_name(l, "qkv"));
    layer.wo = make_linear(m.wo, d, q_dim_, precision, layer_name(l, "wo"));
    layer.gate_up = make_linear(m.gate_up, 2 * ffn, d, precision, layer_name(l, "gate_up"));
    layer.down = make_linear(m.down, d, ffn, precision, layer_name(l, "down"));
  }

  // Measured on the default model, 400 teacher-forced positions against llama.cpp, one INT8
  // term everywhere: no smoothing 87.0 % top-1 agreement, KL 0.032; alpha 0.3 / 0.4 / 0.5 /
  // 0.65 / 0.8: KL 0.021 / 0.016 / 0.015 / 0.018 / 0.028. The linears with two-term inputs
  // (activations_for) need no help with activation outliers, and a smaller alpha suits their
  // weights: over 1,464 positions against llama.cpp on F32 weights, alpha 0.3 / 0.35 / 0.4 /
  // 0.45 / 0.5 / 0.65 for them gave top-1 96.1 / 95.6 / 96.2 / 95.8 / 94.9 / 93.7 %, KL 0.0075 /
  // 0.0033 / 0.0071 / 0.0035 / 0.0039 / 0.0102 (KL hangs on a few positions, hence its jumps).
  static float smoothing_alpha(const char* linear) {
    return activations_for(linear) == k::ActivationQuant::residual ? 0.35f : 0.5f;
  }

  // Folds layer l's smoothing factors into its matrices and norms (backend/cpu/smoothing.hpp).
  void smooth_layer(std::size_t l, const LayerRanges& r, Matrices& m) {
    const std::int64_t d = config_.embedding, ffn = config_.ffn, qkv_rows = q_dim_ + 2 * kv_dim_;
    const int hd = config_.head_dim, group = config_.heads / config_.kv_heads;
    Layer& layer = layers_[l];
    // Inputs that come out of an RMSNorm: its weight takes the 1/s.
    auto s = smoothing_factors(r.qkv_in, m.qkv.data(), qkv_rows, d, smoothing_alpha(".qkv"));
    scale_columns(m.qkv.data(), qkv_rows, d, s);
    divide(layer.attn_norm, s);
    s = smoothing_factors(r.gate_up_in, m.gate_up.data(), 2 * ffn, d, smoothing_alpha(".gate_up"));
    scale_columns(m.gate_up.data(), 2 * ffn, d, s);
    divide(layer.ffn_norm, s);
    // silu(gate) * up is linear in up: up's output rows take the 1/s of the down input.
    s = smoothing_factors(r.down_in, m.down.data(), d, ffn, smoothing_alpha(".down"));
    scale_columns(m.down.data(), d, ffn, s);
    for (std::int64_t j = 0; j < ffn; ++j)
      for (std::int64_t i = 0; i < d; ++i) m.gate_up[static_cast<std::size_t>((ffn + j) * d + i)] /= s[static_cast<std::size_t>(j)];
    // The attention output is linear in V: V's rows take the 1/s of the output projection's
    // input. Query heads sharing a KV head must share the factor (the largest of the group).
    s = smoothing_factors(r.wo_in, m.wo.data(), d, q_dim_, smoothing_alpha(".wo"));
    for (int kvh = 0; kvh < config_.kv_heads; ++kvh)
      for (int i = 0; i < hd; ++i) {
        float shared = 0;
        for (int h = kvh * group; h < (kvh + 1) * group; ++h) shared = std::max(shared, s[static_cast<std::size_t>(h * hd + i)]);
        for (int h = kvh * group; h < (kvh + 1) * group; ++h) s[static_cast<std::size_t>(h * hd + i)] = shared;
        const std::int64_t v_row = q_dim_ + kv_dim_ + kvh * hd + i;
        for (std::int64_t c = 0; c < d; ++c) m.qkv[static_cast<std::size_t>(v_row * d + c)] /= shared;
        if (!layer.qkv_bias.empty()) layer.qkv_bias[static_cast<std::size_t>(v_row)] /= shared;
      }
    scale_columns(m.wo.data(), d, q_dim_, s);
  }

  // The lm_head, the largest matrix (vocab rows), from `tensor` a slice of rows at a time on the
  // INT8 path: the smoothing factors need each column's maximum over all rows, so the slices
  // are dequantized twice (once for the maxima, once to quantize) rather than held in FP32.
  void prepare_lm_head(const model::GgufTensor& tensor, const ChannelRange& input_range) {
    const std::int64_t vocab = config_.vocab, d = config_.embedding;
    if (gemm_ == GemmPrecision::fp32) {
      lm_head_ = make_linear(model::dequantize_tensor(tensor), vocab, d, gemm_, "lm_head");
      return;
    }
    constexpr std::int64_t kSliceRows = 4096;
    std::vector<float> slice(static_cast<std::size_t>(std::min(vocab, kSliceRows) * d));
    const auto for_each_slice = [&](auto&& visit) {
      for (std::int64_t first = 0; first < vocab; first += kSliceRows) {
        const std::int64_t count = std::min(kSliceRows, vocab - first);
        model::dequantize_rows(tensor, first, count, slice.data());
        visit(first, count);
      }
    };
    std::vector<float> s(static_cast<std::size_t>(d), 1.0f);
    if (!input_range.max_abs.empty()) {
      std::vector<float> column_max(static_cast<std::size_t>(d), 0.0f);
      for_each_slice([&](std::int64_t, std::int64_t count) {
        column_abs_max(slice.data(), count, d, column_max);
      });
      s = smoothing_factors(input_range, column_max, smoothing_alpha("lm_head"));
      divide(output_norm_, s);
    }
    k::QuantizedWeights q{vocab, d, std::vector<std::int8_t>(static_cast<std::size_t>(vocab * d)),
                          std::vector<float>(static_cast<std::size_t>(vocab))};
    for_each_slice([&](std::int64_t first, std::int64_t count) {
      scale_columns(slice.data(), count, d, s);
      k::quantize_weights_s8(slice.data(), count, d, q.q.data() + first * d, q.scales.data() + first,
                             ctx_.threads, k::int8_weight_range());
    });
    if (cache_ != nullptr) cache_->add_linear("lm_head", vocab, d, q.q.data(), q.scales.data());
    lm_head_ = k::make_int8_linear(ctx_, q.q.data(), q.scales.data(), vocab, d, activations_for("lm_head"));
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
    std::string r = fmt::format("cpu-int8 preparation {}, calibration {} tokens {:016x}", kPreparationRevision,
                                options.calibration_tokens.size(), calibration.value());
    // The smoothing factors come from a forward pass, so they depend on the RoPE frequencies;
    // the model identity covers the scaling metadata but samples rope_freqs.weight's values
    // only by chance. Named only when not the plain RoPE, so other models keep their key.
    const float scale = config_.rope_position_scale();
    if (!options.calibration_tokens.empty() && (!config_.rope_freq_factors.empty() || scale != 1.0f)) {
      Hasher rope;
      rope.update(config_.rope_freq_factors.data(), config_.rope_freq_factors.size() * sizeof(float));
      rope.update(&scale, sizeof(scale));
      r += fmt::format(", rope {:016x}", rope.value());
    }
    return r;
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
        auto built = k::make_int8_linear(ctx_, c.q, c.scales, out, in, activations_for(name));
        // Packed into the linear's own layouts: the file's pages may leave resident memory.
        model::release_pages(c.q, static_cast<std::uint64_t>(out * in));
        return built;
      };
      layers_.resize(w.layers.size());
      for (std::size_t l = 0; l < layers_.size(); ++l) {
        Layer& layer = layers_[l];
        layer.attn_norm = cache.vector(layer_name(l, "attn_norm"), d);
        layer.ffn_norm = cache.vector(layer_name(l, "ffn_norm"), d);
        if (w.layers[l].bq != nullptr) layer.qkv_bias = cache.vector(layer_name(l, "qkv_bias"), q_dim_ + 2 * kv_dim_);
        read_unsmoothed_norms(w.layers[l], layer);
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

  // The norms smoothing never touches (q/k norm, post-norms): read from the model on every
  // open, cold or warm, so the weight cache holds only what preparation changed.
  void read_unsmoothed_norms(const model::LayerWeights& lw, Layer& layer) const {
    if (lw.q_norm != nullptr) {
      layer.q_norm = model::dequantize_vector(lw.q_norm, config_.head_dim);
      layer.k_norm = model::dequantize_vector(lw.k_norm, config_.head_dim);
    }
    if (lw.post_attn_norm != nullptr) {
      layer.post_attn_norm = model::dequantize_vector(lw.post_attn_norm, config_.embedding);
      layer.post_ffn_norm = model::dequantize_vector(lw.post_ffn_norm, config_.embedding);
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
