#include "backend/cpu/weight_preparation.hpp"

#include "backend/cpu/calibration_text.hpp"
#include "backend/cpu/sliced_linear.hpp"
#include "backend/cpu/smoothing.hpp"
#include "backend/cpu/weight_cache.hpp"
#include "kernels/cpu/gemm_grouped.hpp"
#include "kernels/cpu/quantize.hpp"
#include "util/check.hpp"
#include "util/fp16.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <exception>
#include <filesystem>
#include <string_view>

namespace ember::backend::cpu {
namespace {

namespace k = ember::kernels::cpu;
using model::GraphWeight;
using model::WeightId;
using model::WeightRef;

// Bump when the preparation (dequantize, smoothing, quantization) changes what it produces
// without a change of ember's version: a cache written by the old code must not be read.
constexpr int kPreparationRevision = 6;  // 6: the smoothing factors are cached too

// A weight's name in the weight cache.
std::string cache_name(WeightRef r) {
  static constexpr std::array<const char*, model::kWeightIdCount> kNames = {
      "attn_norm",      "qkv",          "qkv_bias",    "q_norm",    "k_norm",         "wo",
      "post_attn_norm", "ffn_norm",     "gate_up",     "down",      "post_ffn_norm",  "router",
      "expert_gate_up", "expert_down",  "output_norm", "lm_head",   "attn_norm_bias", "ffn_norm_bias",
      "wo_bias",        "gate_up_bias", "down_bias",   "embd_norm", "embd_norm_bias", "position_embd",
      "token_types"};
  const char* name = kNames[static_cast<std::size_t>(r.id)];
  return r.layer < 0 ? std::string(name) : fmt::format("blk.{}.{}", r.layer, name);
}

// Whether preparation changes a weight (smoothing folds its factors into it): those are in the
// weight cache; the others are read from the model on every open, cold or warm.
bool prepared(WeightId id) {
  return id != WeightId::q_norm && id != WeightId::k_norm && id != WeightId::post_attn_norm &&
         id != WeightId::post_ffn_norm && id < WeightId::attn_norm_bias;  // encoders' vectors: never smoothed
}

// Where one INT8 term per activation row loses too much, the input is quantized as two terms
// (kernels/cpu/linear.hpp, ActivationQuant::residual). The inputs of gate_up and qkv (the
// norms' outputs) and of the down projection (the SwiGLU product) carry the largest outliers,
// and the lm_head's logits are what top-1 agreement sees. Two terms double those matrices'
// prefill GEMM work; decode streams the weights once for both terms. The top-1 agreement and
// KL of each choice: docs/benchmarks.md#two-term-activations.
// An encoder (no smoothing: its norms follow the residual adds) takes two terms everywhere, the
// attention output too: docs/benchmarks.md#encoder-int8.
k::ActivationQuant activations_for(WeightId id, bool encoder = false) {
  const bool two_terms = encoder || id == WeightId::qkv || id == WeightId::gate_up || id == WeightId::down ||
                         id == WeightId::expert_gate_up || id == WeightId::expert_down || id == WeightId::lm_head;
  return two_terms ? k::ActivationQuant::residual : k::ActivationQuant::per_row;
}

// The smoothing strength: the linears with two-term inputs (activations_for) need no help with
// activation outliers, and a smaller alpha suits their weights. The agreement and KL of each
// alpha tried: docs/benchmarks.md#smoothing-alpha.
float smoothing_alpha(WeightId id) { return activations_for(id) == k::ActivationQuant::residual ? 0.35f : 0.5f; }

// The input ranges of one layer's linears (and the lm_head's), as calibration observes them.
class RangeObserver final : public LinearInputObserver {
 public:
  void observe(WeightRef linear, const float* x, std::int64_t rows, std::int64_t cols) override {
    ranges_[static_cast<std::size_t>(linear.id)].observe(x, rows, cols);
  }
  const ChannelRange& of(WeightId id) const { return ranges_[static_cast<std::size_t>(id)]; }
  void clear() { ranges_ = {}; }

 private:
  std::array<ChannelRange, model::kWeightIdCount> ranges_;
};

// How the INT8 path keeps matrix w: in the file's own groups of 32 (bits 4: w4a8; 8: w8a8-g32),
// with its activations in one INT8 term per group or two, or requantized to w8a8 (bits 0). A
// grouped matrix's sources must all be of one grouped width.
struct GroupedForm {
  int bits = 0;
  k::ActivationQuant activations = k::ActivationQuant::per_row;
};

// 4-bit matrices keep their groups in the automatic format. A Q8_0 lm_head keeps them in both
// formats, with two activation terms: requantizing it cost the most agreement, and with two
// terms its file's groups give what an FP32 lm_head gives (docs/benchmarks.md#q8-0-lm-head).
// The logits are what top-1 sees, and decode streams the weights once for both terms. Q8_0
// layers stay w8a8, whose prefill on AVX-512 VNNI and AMX CPUs runs oneDNN's brgemm, faster
// than the grouped kernel at hundreds of rows.
//
// An encoder's float matrices (BERT files are F16) are quantized into groups of 32 here, with two
// activation terms: per output channel, the short texts of all-MiniLM-L6-v2 fell below a cosine
// of 0.999 to llama.cpp's embeddings (docs/benchmarks.md#encoder-int8).
GroupedForm grouped_form(const GraphWeight& w, Precision gemm, WeightFormat format, bool encoder) {
  if (gemm != Precision::int8 || w.cols % k::kWeightGroup != 0) return {};
  const int bits = model::group_bits(w.sources.at(0)->type);
  const bool same = std::all_of(w.sources.begin(), w.sources.end(),
                                [&](const model::GgufTensor* t) { return model::group_bits(t->type) == bits; });
  if (!same) return {};
  if (bits == 0 && encoder) return {8, k::ActivationQuant::residual};
  if (bits == 8 && w.ref.id == WeightId::lm_head) return {8, k::ActivationQuant::residual};
  if (bits == 4 && format == WeightFormat::automatic) return {4, k::ActivationQuant::per_row};
  return {};
}

// Whether grouped matrix w keeps an offset per group: Q4_0 and Q8_0 groups have none of their
// own (o = -bias * d), nor those quantized here.
bool group_offsets(const GraphWeight& w) {
  return std::any_of(w.sources.begin(), w.sources.end(), [](const model::GgufTensor* t) {
    return t->type != model::GgmlType::Q4_0 && t->type != model::GgmlType::Q8_0 && model::group_bits(t->type) != 0;
  });
}

// One float row quantized to 8-bit groups of 32 with no offset of their own (Q8_0's form: the
// scale max|x| / 127 rounded to FP16, as the kernel holds it, before the values are rounded).
void quantize_float_row(const model::GgufTensor& t, std::int64_t row, std::int64_t cols, std::uint8_t* values,
                        float* scales, float* offsets) {
  std::vector<float> x(static_cast<std::size_t>(cols));
  model::dequantize_row(t, row, x.data());
  for (std::int64_t g = 0; g < cols / k::kWeightGroup; ++g) {
    const float* v = x.data() + g * k::kWeightGroup;
    float amax = 0.0f;
    for (std::int64_t e = 0; e < k::kWeightGroup; ++e) amax = std::max(amax, std::fabs(v[e]));
    const float d = fp16_to_float(float_to_fp16(amax / 127.0f));
    const float inv = d > 0.0f ? 1.0f / d : 0.0f;
    for (std::int64_t e = 0; e < k::kWeightGroup; ++e) {
      const long q = std::clamp(std::lround(v[e] * inv), -127L, 127L);
      values[g * k::kWeightGroup + e] = static_cast<std::uint8_t>(q + 128);
    }
    scales[g] = d;
    offsets[g] = -128.0f * d;
  }
}

// Matrix w's rows as the grouped kernel reads them, from its file tensors stacked row-wise (of
// an expert weight, expert `expert`'s rows).
k::GroupedRowSource group_rows(const GraphWeight& w, int expert) {
  return [w, expert](std::int64_t row, std::uint8_t* values, float* scales, float* offsets) {
    if (w.experts > 0) {
      const model::SourceRow at = model::expert_row(w, expert, row);
      const std::uint64_t row_bytes = *model::ggml_row_bytes(at.tensor->type, w.cols);
      model::read_groups(at.tensor->type, at.tensor->data + static_cast<std::uint64_t>(at.row) * row_bytes, w.cols,
                         values, scales, offsets);
      return;
    }
    for (const model::GgufTensor* t : w.sources) {
      if (row >= t->rows()) {
        row -= t->rows();
        continue;
      }
      if (model::group_bits(t->type) == 0) {  // an encoder's float matrix (grouped_form)
        quantize_float_row(*t, row, w.cols, values, scales, offsets);
        return;
      }
      const std::uint64_t row_bytes = *model::ggml_row_bytes(t->type, w.cols);
      model::read_groups(t->type, t->data + static_cast<std::uint64_t>(row) * row_bytes, w.cols, values, scales,
                         offsets);
      return;
    }
    EMBER_ASSERT(false);
  };
}

// The calibration text's forward pass, run a layer at a time while the weights are prepared.
struct Calibration {
  Batch batch;
  std::unique_ptr<KvCache> kv;
  RangeObserver observer;
  std::unique_ptr<CpuOps> ops;
};

class Preparer {
 public:
  Preparer(const model::GgufFile& file, const model::ModelConfig& config, const model::DecoderTensors& tensors,
           k::CpuContext& ctx, const BackendOptions& options, Precision gemm)
      : file_(file),
        config_(config),
        tensors_(tensors),
        ctx_(ctx),
        options_(options),
        gemm_(gemm),
        weights_(config.layers),
        grouped_(static_cast<std::size_t>(config.layers)) {
    int w4 = 0, w8_groups = 0, w8 = 0;
    for (int l = -1; l < config_.layers; ++l)
      for (const GraphWeight& w :
           l < 0 ? model::head_weights(tensors_, config_) : model::layer_weights(tensors_, config_, l)) {
        if (!w.is_matrix() || w.ref.id == WeightId::router) continue;  // the router is FP32 (build())
        const int bits = form(w).bits;
        (bits == 4 ? w4 : bits == 8 ? w8_groups : w8) += 1;
        if (bits > 0 && l >= 0) grouped_[static_cast<std::size_t>(l)][static_cast<std::size_t>(w.ref.id)] = true;
      }
    w8a8_matrices_ = w8;
    if (gemm_ == Precision::fp32) {
      format_ = "fp32";
    } else {  // the forms present, joined by '+': "w4a8+w8a8-g32" for a Q4 file with a Q8_0 lm_head
      for (const auto& [count, name] :
           {std::pair{w4, "w4a8"}, std::pair{w8_groups, "w8a8-g32"}, std::pair{w8, "w8a8"}}) {
        if (count == 0) continue;
        if (!format_.empty()) format_ += '+';
        format_ += name;
      }
    }
  }

  PreparedWeights run() {
    // FP32 weights are neither calibrated nor cached: preparing them is the whole load.
    if (gemm_ == Precision::fp32 && options_.progress) options_.progress->plan({{LoadPhase::weights, 1}});
    std::vector<std::int32_t> calibration_tokens;
    // Calibration observes the FP32 model's activations for the smoothing of w8a8 matrices (and
    // of the lm_head, which needs every layer before it): not needed when no layer has one.
    bool smoothing = false;
    for (int l = 0; l < config_.layers; ++l)
      for (const WeightId id : {WeightId::qkv, WeightId::wo, WeightId::gate_up, WeightId::down})
        smoothing |= smoothable(l, id);
    if (gemm_ == Precision::int8 && options_.tokenize && smoothing)
      calibration_tokens = options_.tokenize(kCalibrationText);
    std::unique_ptr<WeightCacheWriter> cache;
    if (gemm_ == Precision::int8 && w8a8_matrices_ > 0 && !options_.weight_cache_dir.empty()) {
      const WeightCacheFile cache_file =
          weight_cache_file(options_.weight_cache_dir, file_, recipe(calibration_tokens));
      if (restore(cache_file)) return {std::move(weights_), format_};
      cache = std::make_unique<WeightCacheWriter>(cache_file, options_.log);
    }
    prepare(calibration_tokens, cache.get());
    if (cache) cache->commit();
    if (gemm_ == Precision::int8) report(LoadPhase::cache, 1.0f);
    return {std::move(weights_), format_};
  }

 private:
  // The FP32 matrices of one layer, kept only while that layer is prepared; their memory is
  // reused by the next layer.
  using Matrices = std::array<std::vector<float>, model::kWeightIdCount>;

  void prepare(const std::vector<std::int32_t>& calibration_tokens, WeightCacheWriter* cache) {
    report(LoadPhase::weights, 0.0f);
    std::unique_ptr<Calibration> calibration;
    if (!calibration_tokens.empty()) calibration = begin_calibration(calibration_tokens);
    Matrices m;
    for (int l = 0; l < config_.layers; ++l) {
      const std::vector<GraphWeight> layer = model::layer_weights(tensors_, config_, l);
      for (const GraphWeight& w : layer) {
        if (w.experts > 0)  // in their final form at once, one expert at a time: never smoothed
          build_experts(w);
        else if (!w.is_matrix())
          weights_[w.ref].values = dequantize(w);
        else if (calibration || form(w).bits == 0)
          dequantize(w, m[static_cast<std::size_t>(w.ref.id)]);
      }
      if (calibration) {
        for (const GraphWeight& w : layer)
          if (w.is_matrix() && w.experts == 0) build(w, m, Precision::fp32, nullptr);
        calibration->observer.clear();
        model::run_layer(config_, l, *calibration->ops, calibration->batch.rows());
        smooth_layer(l, calibration->observer, m);
      }
      for (const GraphWeight& w : layer)
        if (w.is_matrix() && w.experts == 0) build(w, m, gemm_, cache);
      for (const GraphWeight& w : layer)
        for (const model::GgufTensor* t : w.sources) file_.release(*t);
      report(LoadPhase::weights, static_cast<float>(l + 1) / (config_.layers + 1));
    }
    m = {};  // before the lm_head's own buffers
    const std::vector<GraphWeight> head = model::head_weights(tensors_, config_);
    for (const GraphWeight& w : head)
      if (!w.is_matrix()) weights_[w.ref].values = dequantize(w);
    if (config_.has_lm_head) {  // (an encoder has its embedding norm and tables only)
      ChannelRange lm_head_in;
      if (calibration) {
        calibration->observer.clear();
        const auto n = static_cast<std::int64_t>(calibration->batch.logit_rows.size());
        model::run_stage(config_, -1, model::Stage::final_norm, *calibration->ops, n, 0, 1);
        lm_head_in.observe(calibration->ops->data(model::Activation::h), n, config_.embedding);
        calibration.reset();
      }
      prepare_lm_head(head[1], lm_head_in, cache);
      // Tied or not, the embedding rows a step reads fault back in one page at a time.
      file_.release(*tensors_.output);
    }
    if (cache)  // the vectors as smoothing left them, and the factors (LoRA adapters need them)
      for (int l = -1; l < config_.layers; ++l)
        for (const GraphWeight& w : l < 0 ? head : model::layer_weights(tensors_, config_, l)) {
          if (!w.is_matrix() && prepared(w.ref.id)) cache->add_vector(cache_name(w.ref), weights_[w.ref].values);
          if (!weights_[w.ref].smoothing.empty())
            cache->add_vector(cache_name(w.ref) + ".smoothing", weights_[w.ref].smoothing);
        }
    report(LoadPhase::weights, 1.0f);
  }

  std::unique_ptr<Calibration> begin_calibration(const std::vector<std::int32_t>& tokens) {
    auto c = std::make_unique<Calibration>();
    const int n = static_cast<int>(tokens.size());
    const KvGeometry g{{16, config_.kv_heads, config_.head_dim, KvCacheType::f32}, config_.layers, (n + 15) / 16};
    c->kv = std::make_unique<KvCache>(g);
    c->batch.sequences.push_back({0, n, {}, {}});
    for (int i = 0; i < n; ++i) {
      c->batch.tokens.push_back(tokens[static_cast<std::size_t>(i)]);
      c->batch.positions.push_back(i);
      c->batch.slots.push_back(i);
      c->batch.logit_rows.push_back(i);
    }
    for (int b = 0; b < g.block_count; ++b) c->batch.sequences[0].block_table.push_back(b);
    validate_batch(c->batch, g.block_count, g.block_size, config_.vocab);
    c->ops = std::make_unique<CpuOps>(config_, weights_, *tensors_.token_embd, ctx_, &c->observer);
    c->ops->begin(c->batch, *c->kv, nullptr);
    model::begin_step(config_, *c->ops);
    return c;
  }

  static void dequantize(const GraphWeight& w, std::vector<float>& out) {
    std::int64_t elements = 0;
    for (const auto* t : w.sources) elements += t->numel();
    EMBER_ASSERT(elements == w.elements());
    out.resize(static_cast<std::size_t>(elements));  // keeps its capacity when it shrinks
    float* dst = out.data();
    for (const auto* t : w.sources) {
      model::dequantize(t->type, t->data, dst, t->numel());
      dst += t->numel();
    }
  }
  static std::vector<float> dequantize(const GraphWeight& w) {
    std::vector<float> v;
    dequantize(w, v);
    return v;
  }

  void build(const GraphWeight& w, const Matrices& m, Precision precision, WeightCacheWriter* cache) {
    const std::vector<float>& values = m[static_cast<std::size_t>(w.ref.id)];
    std::unique_ptr<k::Linear>& linear = weights_[w.ref].linear;
    if (w.ref.id == WeightId::router) {  // FP32 values for routed_ffn.cpp's own product: the choice of
      weights_[w.ref].values = values;   // experts must not depend on the tier or the batch
      return;
    }
    if (precision == Precision::int8 && form(w).bits > 0) {
      linear = make_grouped(w);
      return;
    }
    if (precision == Precision::fp32) {  // sliced for a budgeted step; calibration's run whole
      linear = gemm_ == Precision::fp32 ? make_sliced_fp32_linear(ctx_, values.data(), w.rows, w.cols)
                                        : k::make_fp32_linear(ctx_, values.data(), w.rows, w.cols);
      return;
    }
    const k::QuantizedWeights q = k::quantize_int8_weights(ctx_, values.data(), w.rows, w.cols);
    if (cache != nullptr) cache->add_linear(cache_name(w.ref), w.rows, w.cols, q.q.data(), q.scales.data());
    linear = k::make_int8_linear(ctx_, q.q.data(), q.scales.data(), w.rows, w.cols,
                                 activations_for(w.ref.id, config_.norm_after_residual));
  }

  // How this preparation keeps matrix w (grouped_form()).
  GroupedForm form(const GraphWeight& w) const {
    return grouped_form(w, gemm_, options_.weight_format, config_.norm_after_residual);
  }

  // An expert weight's linears, one expert at a time from the file: the file's groups (w4a8), or
  // FP32 or INT8 from one expert's FP32 copy, which the next expert's reuses.
  void build_experts(const GraphWeight& w) {
    std::vector<std::unique_ptr<k::Linear>>& experts = weights_[w.ref].experts;
    experts.clear();
    experts.resize(static_cast<std::size_t>(w.experts));
    if (form(w).bits > 0) {
      build_grouped_experts(w, experts);
      return;
    }
    std::vector<float> values;
    for (int e = 0; e < w.experts; ++e) {
      values.resize(static_cast<std::size_t>(w.rows * w.cols));
      float* dst = values.data();
      for (const model::SourceRows& part : model::expert_sources(w, e)) {
        model::dequantize_rows(*part.tensor, part.first, part.count, dst);
        dst += part.count * w.cols;
      }
      experts[static_cast<std::size_t>(e)] =
          gemm_ == Precision::fp32
              ? k::make_fp32_linear(ctx_, values.data(), w.rows, w.cols)
              : k::make_int8_linear(ctx_, values.data(), w.rows, w.cols, activations_for(w.ref.id));
      release_expert(w, e);
    }
  }

  // Experts kept in the file's groups, one expert per thread: an expert is small, and with each
  // one's rows split between the threads instead, a Qwen3-30B-A3B-shaped file opened through
  // thousands of short parallel regions, each waiting at its barrier for a thread that a busy
  // machine had descheduled.
  void build_grouped_experts(const GraphWeight& w, std::vector<std::unique_ptr<k::Linear>>& experts) {
    std::exception_ptr error;
#pragma omp parallel for num_threads(ctx_.threads) schedule(dynamic)
    for (int e = 0; e < w.experts; ++e) {
      try {
        experts[static_cast<std::size_t>(e)] = make_grouped(w, e, /*pack_threads=*/1);
        release_expert(w, e);
      } catch (...) {
#pragma omp critical(ember_build_experts)
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
  }

  // The expert's file pages leave resident memory as soon as it is packed, not with its layer:
  // the experts are most of a layer's bytes, and a whole layer of them resident beside the
  // packed copies is what a large model cannot spare while it opens.
  void release_expert(const GraphWeight& w, int e) const {
    for (const model::SourceRows& part : model::expert_sources(w, e))
      file_.release_rows(*part.tensor, part.first, part.count);
  }

  std::unique_ptr<k::Linear> make_grouped(const GraphWeight& w, int expert = 0, int pack_threads = 0) {
    const GroupedForm f = form(w);
    return k::make_grouped_linear(ctx_, w.rows, w.cols, k::GroupFormat{f.bits, group_offsets(w)}, group_rows(w, expert),
                                  f.activations, pack_threads);
  }

  // Whether smoothing may rescale matrix `id` of layer l: the factors are folded into the
  // matrix's columns and into what feeds it (a norm; the up rows for down, the V rows for wo),
  // which a matrix kept in the file's groups cannot take.
  bool smoothable(int l, WeightId id) const {
    // An encoder's norms come after the residual adds (and carry biases): nothing to fold into.
    if (gemm_ != Precision::int8 || config_.norm_after_residual) return false;
    if (config_.routed() && (id == WeightId::gate_up || id == WeightId::down)) return false;  // experts: not smoothed
    const auto& grouped = grouped_[static_cast<std::size_t>(l)];
    const auto is_grouped = [&](WeightId w) { return grouped[static_cast<std::size_t>(w)]; };
    if (is_grouped(id)) return false;
    if (id == WeightId::down) return !is_grouped(WeightId::gate_up);
    if (id == WeightId::wo) return !is_grouped(WeightId::qkv);
    return true;
  }

  // Folds layer l's smoothing factors into its matrices and norms (backend/cpu/smoothing.hpp),
  // for the matrices that can take them (smoothable).
  void smooth_layer(int l, const RangeObserver& r, Matrices& m) {
    const std::int64_t d = config_.embedding, ffn = config_.ffn;
    const std::int64_t q_dim = std::int64_t{config_.heads} * config_.head_dim;
    const std::int64_t kv_dim = std::int64_t{config_.kv_heads} * config_.head_dim, qkv_rows = q_dim + 2 * kv_dim;
    const int hd = config_.head_dim, group = config_.heads / config_.kv_heads;
    std::vector<float>& qkv = m[static_cast<std::size_t>(WeightId::qkv)];
    std::vector<float>& wo = m[static_cast<std::size_t>(WeightId::wo)];
    std::vector<float>& gate_up = m[static_cast<std::size_t>(WeightId::gate_up)];
    std::vector<float>& down = m[static_cast<std::size_t>(WeightId::down)];
    // Inputs that come out of an RMSNorm: its weight takes the 1/s.
    if (smoothable(l, WeightId::qkv)) {
      const auto s = smoothing_factors(r.of(WeightId::qkv), qkv.data(), qkv_rows, d, smoothing_alpha(WeightId::qkv));
      scale_columns(qkv.data(), qkv_rows, d, s);
      divide(weights_[{l, WeightId::attn_norm}].values, s);
      weights_[{l, WeightId::qkv}].smoothing = s;
    }
    if (smoothable(l, WeightId::gate_up)) {
      const auto s =
          smoothing_factors(r.of(WeightId::gate_up), gate_up.data(), 2 * ffn, d, smoothing_alpha(WeightId::gate_up));
      scale_columns(gate_up.data(), 2 * ffn, d, s);
      divide(weights_[{l, WeightId::ffn_norm}].values, s);
      weights_[{l, WeightId::gate_up}].smoothing = s;
    }
    // act(gate) * up is linear in up: up's output rows take the 1/s of the down input.
    if (smoothable(l, WeightId::down)) {
      const auto s = smoothing_factors(r.of(WeightId::down), down.data(), d, ffn, smoothing_alpha(WeightId::down));
      scale_columns(down.data(), d, ffn, s);
      for (std::int64_t j = 0; j < ffn; ++j)
        for (std::int64_t i = 0; i < d; ++i)
          gate_up[static_cast<std::size_t>((ffn + j) * d + i)] /= s[static_cast<std::size_t>(j)];
      weights_[{l, WeightId::down}].smoothing = s;
    }
    if (!smoothable(l, WeightId::wo)) return;
    // The attention output is linear in V: V's rows take the 1/s of the output projection's
    // input. Query heads sharing a KV head must share the factor (the largest of the group).
    std::vector<float>* bias = config_.attention_bias ? &weights_[{l, WeightId::qkv_bias}].values : nullptr;
    auto s = smoothing_factors(r.of(WeightId::wo), wo.data(), d, q_dim, smoothing_alpha(WeightId::wo));
    for (int kvh = 0; kvh < config_.kv_heads; ++kvh)
      for (int i = 0; i < hd; ++i) {
        float shared = 0;
        for (int h = kvh * group; h < (kvh + 1) * group; ++h)
          shared = std::max(shared, s[static_cast<std::size_t>(h * hd + i)]);
        for (int h = kvh * group; h < (kvh + 1) * group; ++h) s[static_cast<std::size_t>(h * hd + i)] = shared;
        const std::int64_t v_row = q_dim + kv_dim + kvh * hd + i;
        for (std::int64_t c = 0; c < d; ++c) qkv[static_cast<std::size_t>(v_row * d + c)] /= shared;
        if (bias != nullptr) (*bias)[static_cast<std::size_t>(v_row)] /= shared;
      }
    scale_columns(wo.data(), d, q_dim, s);
    weights_[{l, WeightId::wo}].smoothing = std::move(s);
  }

  // The lm_head from its tensor a slice of rows at a time on the INT8 path: the smoothing
  // factors need each column's maximum over all rows, so the slices are dequantized twice (once
  // for the maxima, once to quantize) rather than held in FP32.
  void prepare_lm_head(const GraphWeight& w, const ChannelRange& input_range, WeightCacheWriter* cache) {
    const std::int64_t vocab = w.rows, d = w.cols;
    const model::GgufTensor& tensor = *w.sources.at(0);
    if (form(w).bits > 0) {
      weights_[w.ref].linear = make_grouped(w);
      return;
    }
    if (gemm_ == Precision::fp32) {
      weights_[w.ref].linear = make_sliced_fp32_linear(ctx_, model::dequantize_tensor(tensor).data(), vocab, d);
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
      for_each_slice([&](std::int64_t, std::int64_t count) { column_abs_max(slice.data(), count, d, column_max); });
      s = smoothing_factors(input_range, column_max, smoothing_alpha(WeightId::lm_head));
      divide(weights_[{-1, WeightId::output_norm}].values, s);
      weights_[w.ref].smoothing = s;
    }
    k::QuantizedWeights q{vocab, d, std::vector<std::int8_t>(static_cast<std::size_t>(vocab * d)),
                          std::vector<float>(static_cast<std::size_t>(vocab))};
    for_each_slice([&](std::int64_t first, std::int64_t count) {
      scale_columns(slice.data(), count, d, s);
      k::quantize_weights_s8(slice.data(), count, d, q.q.data() + first * d, q.scales.data() + first, ctx_.threads,
                             k::int8_weight_range());
    });
    if (cache != nullptr) cache->add_linear(cache_name(w.ref), vocab, d, q.q.data(), q.scales.data());
    weights_[w.ref].linear =
        k::make_int8_linear(ctx_, q.q.data(), q.scales.data(), vocab, d, activations_for(WeightId::lm_head));
  }

  // ---- the packed-weight cache (weight_cache.hpp) ----

  std::string recipe(const std::vector<std::int32_t>& calibration_tokens) const {
    Hasher calibration;
    calibration.update(calibration_tokens.data(), calibration_tokens.size() * sizeof(std::int32_t));
    std::string r = fmt::format("cpu-int8 preparation {}, calibration {} tokens {:016x}, {}", kPreparationRevision,
                                calibration_tokens.size(), calibration.value(), format_);
    // The smoothing factors come from a forward pass, so they depend on the RoPE frequencies;
    // the model identity covers the scaling metadata but samples rope_freqs.weight's values
    // only by chance. Named only when not the plain RoPE, so other models keep their key.
    const float scale = config_.rope_position_scale();
    if (!calibration_tokens.empty() && (!config_.rope_freq_factors.empty() || scale != 1.0f)) {
      Hasher rope;
      rope.update(config_.rope_freq_factors.data(), config_.rope_freq_factors.size() * sizeof(float));
      rope.update(&scale, sizeof(scale));
      r += fmt::format(", rope {:016x}", rope.value());
    }
    return r;
  }

  // Places every weight from the cache file; false (logged) when there is none or it cannot be
  // used, and the caller prepares the weights from the model instead.
  bool restore(const WeightCacheFile& cache_file) {
    const auto say = [&](LogLevel level, const std::string& message) {
      if (options_.log) options_.log(level, message);
    };
    std::error_code ec;
    if (!std::filesystem::exists(cache_file.path, ec)) {
      say(LogLevel::info, fmt::format("no weight cache at {}: preparing the weights and writing it", cache_file.path));
      return false;
    }
    try {
      if (options_.progress) options_.progress->plan({{LoadPhase::cache, 1}});
      report(LoadPhase::cache, 0.0f);
      const WeightCacheReader cache(cache_file);  // validated whole before anything is built
      const auto place = [&](const GraphWeight& w) {
        if (w.experts > 0 || w.ref.id == WeightId::router) {  // not in the cache: prepared from the file
          if (w.experts > 0) return build_experts(w);
          Matrices m;
          dequantize(w, m[static_cast<std::size_t>(w.ref.id)]);
          return build(w, m, gemm_, nullptr);
        }
        if (!w.is_matrix()) {
          weights_[w.ref].values = prepared(w.ref.id) ? cache.vector(cache_name(w.ref), w.cols) : dequantize(w);
          return;
        }
        if (form(w).bits > 0) {  // not in the cache: the file has them
          weights_[w.ref].linear = make_grouped(w);
          return;
        }
        const CachedLinear c = cache.linear(cache_name(w.ref), w.rows, w.cols);
        if (cache.has(cache_name(w.ref) + ".smoothing"))
          weights_[w.ref].smoothing = cache.vector(cache_name(w.ref) + ".smoothing", w.cols);
        weights_[w.ref].linear = k::make_int8_linear(ctx_, c.q, c.scales, w.rows, w.cols,
                                                     activations_for(w.ref.id, config_.norm_after_residual));
        // Packed into the linear's own layouts: the file's pages may leave resident memory.
        model::release_pages(c.q, static_cast<std::uint64_t>(w.rows * w.cols));
      };
      for (int l = 0; l < config_.layers; ++l) {
        for (const GraphWeight& w : model::layer_weights(tensors_, config_, l)) place(w);
        report(LoadPhase::cache, static_cast<float>(l + 1) / (config_.layers + 1));
      }
      for (const GraphWeight& w : model::head_weights(tensors_, config_)) place(w);
      report(LoadPhase::cache, 1.0f);
      say(LogLevel::info, fmt::format("weights read from the cache {}", cache_file.path));
      return true;
    } catch (const Error& e) {
      if (e.code() == ErrorCode::cancelled) throw;
      say(LogLevel::warning, fmt::format("weight cache ignored, rewriting it: {}", e.what()));
      weights_ = CpuWeights(config_.layers);
      // The arena never frees single blocks: a fresh one, so the linears built before the
      // failure do not keep their memory (the old arena goes with its last user).
      ctx_.decode_weights = std::make_shared<k::WeightArena>();
      if (options_.progress) options_.progress->plan_preparation();
      return false;
    }
  }

  void report(LoadPhase phase, float fraction) const {
    if (options_.progress) options_.progress->report(phase, fraction);
  }

  const model::GgufFile& file_;
  const model::ModelConfig& config_;
  const model::DecoderTensors& tensors_;
  k::CpuContext& ctx_;
  const BackendOptions& options_;
  Precision gemm_;
  CpuWeights weights_;
  std::vector<std::array<bool, model::kWeightIdCount>> grouped_;  // per layer: kept in the file's groups
  int w8a8_matrices_ = 0;
  std::string format_;
};

}  // namespace

FourBitShares four_bit_shares(const model::ModelConfig& config, const model::DecoderTensors& tensors, Precision gemm,
                              WeightFormat format) {
  double all = 0, scale_only = 0, with_offsets = 0;
  for (int l = -1; l < config.layers; ++l)
    for (const GraphWeight& w :
         l < 0 ? model::head_weights(tensors, config) : model::layer_weights(tensors, config, l)) {
      if (!w.is_matrix()) continue;
      const double n = static_cast<double>(w.elements());
      all += n;
      if (grouped_form(w, gemm, format, config.norm_after_residual).bits == 4)
        (group_offsets(w) ? with_offsets : scale_only) += n;
    }
  if (all == 0) return {};
  return {scale_only / all, with_offsets / all};
}

PreparedWeights prepare_cpu_weights(const model::GgufFile& file, const model::ModelConfig& config,
                                    const model::DecoderTensors& tensors, k::CpuContext& ctx,
                                    const BackendOptions& options, Precision gemm) {
  return Preparer(file, config, tensors, ctx, options, gemm).run();
}

}  // namespace ember::backend::cpu
