// The reference forward pass: plain FP32 ops that a newcomer can read top to bottom, run by the
// one layer graph (model/decoder_graph.hpp) for every architecture ModelConfig describes. Every
// optimised path in ember is checked against it (tests, ember-logits); it is an oracle, not a
// Precision an engine runs (Precision::fp32 is the CPU backend's FP32 path). Its matrix products
// use Eigen's well-tuned FP32 GEMM so that whole-model tests stay quick; everything else is
// written as the simplest loops.
//
// Shapes: d = model width, rows = tokens in the batch, hd = head_dim.
#include "backend/cpu/reference.hpp"

#include "backend/cpu/memory_plan.hpp"
#include "kernels/cpu/context.hpp"
#include "kernels/cpu/cpu_tier.hpp"
#include "model/decoder_graph.hpp"
#include "util/check.hpp"
#include "util/fp16.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace ember::backend::cpu {
namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;

// gelu's tanh approximation, as Gemma (and llama.cpp's ggml_gelu) compute it.
float gelu(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

// Rotates each head's first rope_dims values by position-dependent angles: pair i turns by
// position * position_scale * base^(-2i/rope_dims) / factor_i, factor_i a Llama 3 frequency
// factor (rope_freqs.weight; 1 when absent).
struct RopeAngles {
  float base = 10000.0f, position_scale = 1.0f;
};

void rotate_head(float* head, int position, const model::ModelConfig& config, RopeAngles angles) {
  const int rope_dims = config.rope_dims, half = rope_dims / 2;
  const bool interleaved = config.rope_layout == model::RopeLayout::interleaved;
  for (int i = 0; i < half; ++i) {
    double theta = position * static_cast<double>(angles.position_scale) *
                   std::pow(static_cast<double>(angles.base), -2.0 * i / rope_dims);
    if (!config.rope_freq_factors.empty()) theta /= config.rope_freq_factors[static_cast<std::size_t>(i)];
    const float c = static_cast<float>(std::cos(theta)), s = static_cast<float>(std::sin(theta));
    // interleaved: pairs (2i, 2i+1) (GGUF llama files, Q/K rows permuted at export);
    // half: pairs (i, i + rope_dims/2) (GPT-NeoX style).
    const int a = interleaved ? 2 * i : i;
    const int b = interleaved ? 2 * i + 1 : i + half;
    const float x0 = head[a], x1 = head[b];
    head[a] = x0 * c - x1 * s;
    head[b] = x0 * s + x1 * c;
  }
}

// The FP32 ops over one batch: activations are Eigen matrices, weights the FP32 copies the
// backend made at load.
class ReferenceOps final : public model::DecoderOps {
 public:
  ReferenceOps(const model::ModelConfig& config, const model::WeightTable<Matrix>& weights,
               const model::GgufTensor& token_embd, const Batch& batch, KvCache& kv)
      : config_(config), weights_(weights), token_embd_(token_embd), batch_(batch), kv_(kv) {}

  const Matrix& logits() const { return act(model::Activation::logits); }

  void embed(float scale) override {
    Matrix& x = act(model::Activation::x);
    x.resize(batch_.rows(), config_.embedding);
    for (int r = 0; r < batch_.rows(); ++r)
      model::dequantize_row(token_embd_, batch_.tokens[static_cast<std::size_t>(r)], x.row(r).data());
    x *= scale;
  }

  void rope_angles(model::RopeAngleSet set, float base, float position_scale) override {
    angles_[static_cast<std::size_t>(set)] = {base, position_scale};
  }

  // out <- in / rms(in) * weight, row by row.
  void rmsnorm(model::WeightRef weight, model::Activation in, model::Activation out, std::int64_t) override {
    const Matrix x = act(in);  // a copy: out may be in
    const auto w = weights_[weight].row(0);
    Matrix& y = act(out);
    y.resize(x.rows(), x.cols());
    for (Eigen::Index r = 0; r < x.rows(); ++r) {
      const float mean_square = x.row(r).squaredNorm() / static_cast<float>(x.cols());
      const float inv_rms = 1.0f / std::sqrt(mean_square + config_.rms_eps);
      y.row(r) = x.row(r).cwiseProduct(w) * inv_rms;
    }
  }

  // The same over each head_dim slice of the q or k part of every qkv row (q/k norm).
  // OLMoE's spans the whole q (or k) part, as one head.
  void rmsnorm_heads(model::WeightRef weight, model::QkvPart part) override {
    const auto w = weights_[weight].row(0);
    const int hd = static_cast<int>(w.size());
    for_each_head(part, hd, [&](float* head, int) {
      Eigen::Map<Eigen::RowVectorXf> x(head, hd);
      const float inv_rms = 1.0f / std::sqrt(x.squaredNorm() / static_cast<float>(hd) + config_.rms_eps);
      x = x.cwiseProduct(w) * inv_rms;
    });
  }

  void linear(model::WeightRef weight, model::Activation in, model::Activation out, std::int64_t,
              bool accumulate) override {
    if (accumulate)
      act(out) += act(in) * weights_[weight].transpose();
    else
      act(out) = act(in) * weights_[weight].transpose();
  }

  void linear_outputs(model::WeightRef weight, model::Activation in, model::Activation out, std::int64_t,
                      std::int64_t begin, std::int64_t end, bool accumulate) override {
    const Matrix& w = weights_[weight];
    Matrix& y = act(out);
    if (y.rows() != act(in).rows() || y.cols() != w.rows()) y.resize(act(in).rows(), w.rows());
    if (accumulate)
      y.middleCols(begin, end - begin) += act(in) * w.middleRows(begin, end - begin).transpose();
    else
      y.middleCols(begin, end - begin) = act(in) * w.middleRows(begin, end - begin).transpose();
  }

  void add_bias(model::WeightRef bias, model::Activation a) override { act(a).rowwise() += weights_[bias].row(0); }

  void add(model::Activation from, model::Activation into) override { act(into) += act(from); }

  void rope(model::QkvPart part, model::RopeAngleSet set) override {
    const RopeAngles angles = angles_[static_cast<std::size_t>(set)];
    for_each_head(part, config_.head_dim, [&](float* head, int row) {
      rotate_head(head, batch_.positions[static_cast<std::size_t>(row)], config_, angles);
    });
  }

  // Each row's K/V: element (slot, kv_head, i) of the layer's [blocks*block_size, kv_heads, hd].
  void store_kv(int layer) override {
    const Matrix& qkv = act(model::Activation::qkv);
    const int kv_dim = config_.kv_heads * config_.head_dim, q_dim = config_.heads * config_.head_dim;
    const KvCacheType type = kv_.geometry().dtype;
    for (int r = 0; r < batch_.rows(); ++r) {
      const std::size_t base = static_cast<std::size_t>(batch_.slots[static_cast<std::size_t>(r)]) * kv_dim;
      for (int i = 0; i < kv_dim; ++i) {
        store_kv_value(kv_.keys(layer), type, base + i, qkv(r, q_dim + i));
        store_kv_value(kv_.values(layer), type, base + i, qkv(r, q_dim + kv_dim + i));
      }
    }
  }

  // Causal attention of every row over its sequence's cached positions 0..position (only the
  // last `window` of them when window > 0): for each KV head, gather the sequence's keys and
  // values from their blocks into dense matrices, then scores = K q * scale, softmax,
  // out = Vᵀ p. Grouped-query attention: query head h reads KV head h / (heads / kv_heads).
  void attention(int layer, int window, float scale, std::int64_t row_begin, std::int64_t row_end) override {
    const KvGeometry& g = kv_.geometry();
    const int hd = config_.head_dim, group = config_.heads / config_.kv_heads;
    if (scale == 0.0f) scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const Matrix& qkv = act(model::Activation::qkv);
    Matrix& out = act(model::Activation::attn);
    if (out.rows() != batch_.rows() || out.cols() != config_.heads * hd) out.setZero(batch_.rows(), config_.heads * hd);
    Matrix keys, values;
    for (const SequenceSlice& seq : batch_.sequences) {
      const int last = seq.row_begin + seq.row_count - 1;
      const auto first_row = static_cast<int>(std::max<std::int64_t>(seq.row_begin, row_begin));
      const auto last_row = static_cast<int>(std::min<std::int64_t>(last, row_end - 1));
      if (first_row > last_row) continue;
      const int length = batch_.positions[static_cast<std::size_t>(last)] + 1;
      for (int kv_head = 0; kv_head < config_.kv_heads; ++kv_head) {
        keys.resize(length, hd);
        values.resize(length, hd);
        for (int t = 0; t < length; ++t) {
          const int block = seq.block_table[static_cast<std::size_t>(t / g.block_size)];
          const std::size_t slot = static_cast<std::size_t>(block) * g.block_size + t % g.block_size;
          const std::size_t base = (slot * g.kv_heads + kv_head) * hd;
          for (int i = 0; i < hd; ++i) {
            keys(t, i) = load_kv(kv_.keys(layer), g.dtype, base + i);
            values(t, i) = load_kv(kv_.values(layer), g.dtype, base + i);
          }
        }
        for (int r = first_row; r <= last_row; ++r) {
          const int visible = batch_.positions[static_cast<std::size_t>(r)] + 1;  // causal mask
          const int first = window > 0 ? std::max(0, visible - window) : 0;       // sliding window
          const int seen = visible - first;
          for (int head = kv_head * group; head < (kv_head + 1) * group; ++head) {
            const Eigen::Map<const Vector> qh(qkv.row(r).data() + head * hd, hd);
            Vector p = keys.middleRows(first, seen) * qh * scale;
            p = (p.array() - p.maxCoeff()).exp();
            p /= p.sum();
            Eigen::Map<Vector>(out.row(r).data() + head * hd, hd) = values.middleRows(first, seen).transpose() * p;
          }
        }
      }
    }
  }

  // act(gate) * up, act silu (SwiGLU) or gelu (GeGLU).
  void gated_activation(model::FeedForward kind) override {
    const Matrix& gate_up = act(model::Activation::gate_up);
    Matrix& out = act(model::Activation::act);
    const int ffn = config_.ffn;
    out.resize(gate_up.rows(), ffn);
    for (Eigen::Index r = 0; r < gate_up.rows(); ++r)
      for (int i = 0; i < ffn; ++i) {
        const float g = gate_up(r, i);
        const float a = kind == model::FeedForward::geglu ? gelu(g) : g / (1.0f + std::exp(-g));
        out(r, i) = a * gate_up(r, ffn + i);
      }
  }

  // Row by row: softmax of the router's logits, the experts_used most probable experts (ties
  // to the lower index), each expert's SwiGLU weighted by its probability (divided by the
  // chosen probabilities' sum when expert_weights_norm), summed in rank order.
  // (All at the last part: nothing writes `in` before it.)
  void routed_feed_forward(int layer, model::FeedForward kind, model::Activation in, model::Activation out,
                           bool accumulate, std::int64_t, std::int64_t slot_end) override {
    if (slot_end < act(in).rows() * config_.experts_used) return;
    const Matrix h = act(in);  // a copy: out may be in
    const Matrix& router = weights_[{layer, model::WeightId::router}];
    const Matrix& gate_up = weights_[{layer, model::WeightId::expert_gate_up}];  // all gates, then all ups
    const Matrix& down = weights_[{layer, model::WeightId::expert_down}];
    const int n = config_.experts, f = config_.expert_ffn, d = config_.embedding;
    Matrix& y = act(out);
    if (!accumulate) y.setZero(h.rows(), d);
    for (Eigen::Index r = 0; r < h.rows(); ++r) {
      Vector p = router * h.row(r).transpose();
      p = (p.array() - p.maxCoeff()).exp();
      p /= p.sum();
      std::vector<int> order(static_cast<std::size_t>(n));
      for (int e = 0; e < n; ++e) order[static_cast<std::size_t>(e)] = e;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p(a) > p(b); });
      order.resize(static_cast<std::size_t>(config_.experts_used));
      float sum = 0;
      for (int e : order) sum += p(e);
      Vector moe = Vector::Zero(d);
      for (int e : order) {
        const Vector g = gate_up.middleRows(Eigen::Index{e} * f, f) * h.row(r).transpose();
        const Vector u = gate_up.middleRows(Eigen::Index{n + e} * f, f) * h.row(r).transpose();
        Vector a(f);
        for (int i = 0; i < f; ++i)
          a(i) = (kind == model::FeedForward::geglu ? gelu(g(i)) : g(i) / (1.0f + std::exp(-g(i)))) * u(i);
        const float weight = config_.expert_weights_norm ? p(e) / sum : p(e);
        moe += weight * (down.middleRows(Eigen::Index{e} * d, d) * a);
      }
      y.row(r) += moe.transpose();
    }
  }

  void gather_logit_rows() override {
    const Matrix& x = act(model::Activation::x);
    Matrix& selected = act(model::Activation::logit_input);
    selected.resize(static_cast<Eigen::Index>(batch_.logit_rows.size()), x.cols());
    for (Eigen::Index i = 0; i < selected.rows(); ++i)
      selected.row(i) = x.row(batch_.logit_rows[static_cast<std::size_t>(i)]);
  }

 private:
  Matrix& act(model::Activation a) { return acts_[static_cast<std::size_t>(a)]; }
  const Matrix& act(model::Activation a) const { return acts_[static_cast<std::size_t>(a)]; }

  // f(head, row) for each head of the q (or k) part of every qkv row.
  // (`width` values a head: head_dim, or all of the part as one.)
  template <class F>
  void for_each_head(model::QkvPart part, int width, F&& f) {
    Matrix& qkv = act(model::Activation::qkv);
    const bool q = part == model::QkvPart::q;
    const int part_width = (q ? config_.heads : config_.kv_heads) * config_.head_dim;
    const int offset = q ? 0 : config_.heads * config_.head_dim;
    for (int r = 0; r < batch_.rows(); ++r)
      for (int head = 0; head < part_width / width; ++head) f(qkv.row(r).data() + offset + head * width, r);
  }

  static float load_kv(const void* cache, KvCacheType type, std::size_t index) {
    if (type == KvCacheType::f16) return fp16_to_float(static_cast<const std::uint16_t*>(cache)[index]);
    return static_cast<const float*>(cache)[index];
  }
  static void store_kv_value(void* cache, KvCacheType type, std::size_t index, float value) {
    if (type == KvCacheType::f16)
      static_cast<std::uint16_t*>(cache)[index] = float_to_fp16(value);
    else
      static_cast<float*>(cache)[index] = value;
  }

  const model::ModelConfig& config_;
  const model::WeightTable<Matrix>& weights_;
  const model::GgufTensor& token_embd_;
  const Batch& batch_;
  KvCache& kv_;
  std::array<Matrix, 8> acts_;
  std::array<RopeAngles, 2> angles_;
};

class ReferenceBackend final : public Backend {
 public:
  ReferenceBackend(std::shared_ptr<const model::GgufFile> file, const model::ModelConfig& config,
                   const BackendOptions& options)
      : file_(std::move(file)), config_(config), threads_(options.threads), weights_(config.layers) {
    const model::DecoderTensors tensors = model::map_decoder_tensors(*file_, config_);
    check_fits(plan_memory(config_, Precision::fp32), available_memory(), config_);
    if (options.progress) options.progress->plan({{LoadPhase::weights, 1}});  // nothing else to do
    token_embd_ = tensors.token_embd;
    const auto place = [&](const model::GraphWeight& w) {  // experts stacked row-wise
      Matrix& m = weights_[w.ref];
      m.resize(w.elements() / w.cols, w.cols);
      float* dst = m.data();
      for (const model::GgufTensor* t : w.sources) {
        model::dequantize(t->type, t->data, dst, t->numel());
        dst += t->numel();
      }
    };
    for (int l = 0; l < config_.layers; ++l) {
      for (const model::GraphWeight& w : model::layer_weights(tensors, config_, l)) place(w);
      if (options.progress) options.progress->report(LoadPhase::weights, static_cast<float>(l + 1) / config_.layers);
    }
    for (const model::GraphWeight& w : model::head_weights(tensors, config_)) place(w);
  }

  const model::ModelConfig& config() const override { return config_; }
  std::string name() const override { return "cpu-fp32-reference"; }
  std::string weight_format() const override { return "fp32"; }
  std::string cpu_tier() const override { return kernels::cpu::to_string(kernels::cpu::active_tier()); }

  std::unique_ptr<KvCache> make_kv_cache(const KvGeometry& g) const override {
    check_kv_type(g.dtype);
    return Backend::make_kv_cache(g);
  }

  void forward(const Batch& batch, KvCache& kv, std::vector<float>& logits) override {
    const KvGeometry& g = kv.geometry();
    check_kv_type(g.dtype);
    validate_batch(batch, g.block_count, g.block_size, config_.vocab);
    const kernels::cpu::ScopedOmpThreads team(threads_);  // Eigen's products
    ReferenceOps ops(config_, weights_, *token_embd_, batch, kv);
    const auto n_out = static_cast<std::int64_t>(batch.logit_rows.size());
    model::run_decoder(config_, ops, batch.rows(), n_out);
    logits.resize(static_cast<std::size_t>(n_out) * config_.vocab);
    if (n_out > 0) Eigen::Map<Matrix>(logits.data(), n_out, config_.vocab) = ops.logits();
  }

 private:
  // The oracle stores K/V as computed (f32) or in f16; the int8 cache is the CPU backend's.
  static void check_kv_type(KvCacheType type) {
    if (type == KvCacheType::int8)
      fail(ErrorCode::unsupported,
           "KvCacheType::int8 is the CPU backend's; "
           "the reference backend keeps f16 or f32 K/V");
  }

  std::shared_ptr<const model::GgufFile> file_;  // keeps token_embd_ mapped
  model::ModelConfig config_;
  int threads_;
  const model::GgufTensor* token_embd_ = nullptr;  // rows dequantized on lookup
  model::WeightTable<Matrix> weights_;             // vectors are [1, n] matrices
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend(std::shared_ptr<const model::GgufFile> file,
                                                const model::ModelConfig& config, const BackendOptions& options) {
  return std::make_unique<ReferenceBackend>(std::move(file), config, options);
}

}  // namespace ember::backend::cpu
