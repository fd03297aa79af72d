// The reference forward pass: a plain FP32 decoder that a newcomer can read top to bottom, for
// every architecture ModelConfig describes. Every optimised path in ember is checked against it, and it is the baseline the
// speed-ups are measured against, so its matrix products use Eigen's well-tuned FP32 GEMM (a
// fair baseline, not a strawman) while everything else is written as the simplest loops.
//
// Shapes: d = model width, rows = tokens in the batch, hd = head_dim.
#include "backend/cpu/reference.hpp"

#include "backend/cpu/memory_plan.hpp"
#include "model/llama_weights.hpp"
#include "util/check.hpp"
#include "util/fp16.hpp"

#include <Eigen/Core>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace ember::backend::cpu {
namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;

// A GGUF tensor dequantized to an FP32 [rows, cols] matrix (ggml's shape[0] is cols).
Matrix load_matrix(const model::GgufTensor& t) {
  Matrix m(t.rows(), t.shape[0]);
  model::dequantize(t.type, t.data, m.data(), t.numel());
  return m;
}

Vector load_vector(const model::GgufTensor* t, std::int64_t expected) {
  if (t == nullptr) return Vector::Zero(expected);
  Vector v(t->numel());
  model::dequantize(t->type, t->data, v.data(), t->numel());
  return v;
}

struct Layer {
  Vector attn_norm, ffn_norm;
  Vector q_norm, k_norm;               // [head_dim]; empty unless qk_norm
  Vector post_attn_norm, post_ffn_norm;  // empty unless post_norms
  Matrix wq, wk, wv, wo;   // [out, in]
  Vector bq, bk, bv;       // zero unless the model has attention biases (qwen2)
  Matrix w_gate, w_up, w_down;
};

// x <- x / rms(x) * weight, row by row.
void rmsnorm(Matrix& out, const Matrix& x, const Vector& weight, float eps) {
  out.resize(x.rows(), x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const float mean_square = x.row(r).squaredNorm() / static_cast<float>(x.cols());
    const float inv_rms = 1.0f / std::sqrt(mean_square + eps);
    out.row(r) = x.row(r).cwiseProduct(weight.transpose()) * inv_rms;
  }
}

// The same over each head_dim slice of a row of `heads` heads, in place (q/k norm).
void rmsnorm_heads(float* row, int heads, int head_dim, const Vector& weight, float eps) {
  for (int h = 0; h < heads; ++h) {
    Eigen::Map<Eigen::RowVectorXf> x(row + h * head_dim, head_dim);
    const float inv_rms = 1.0f / std::sqrt(x.squaredNorm() / static_cast<float>(head_dim) + eps);
    x = x.cwiseProduct(weight.transpose()) * inv_rms;
  }
}

// gelu's tanh approximation, as Gemma (and llama.cpp's ggml_gelu) compute it.
float gelu(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

// Rotates each head's first rope_dims values by position-dependent angles: pair i turns by
// position * scale * base^(-2i/rope_dims) / factor_i, where base and scale (the linear position
// scaling, 1/factor) are the layer's and factor_i a Llama 3 frequency factor
// (rope_freqs.weight; 1 when absent).
void rope(float* head, int position, const model::ModelConfig& config, int layer) {
  const int rope_dims = config.rope_dims, half = rope_dims / 2;
  const bool interleaved = config.rope_layout == model::RopeLayout::interleaved;
  for (int i = 0; i < half; ++i) {
    double theta = position * static_cast<double>(config.layer_rope_position_scale(layer)) *
                   std::pow(static_cast<double>(config.layer_rope_base(layer)), -2.0 * i / rope_dims);
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

float load_kv(const void* cache, KvCacheType type, std::size_t index) {
  if (type == KvCacheType::f16) return fp16_to_float(static_cast<const std::uint16_t*>(cache)[index]);
  return static_cast<const float*>(cache)[index];
}

void store_kv(void* cache, KvCacheType type, std::size_t index, float value) {
  if (type == KvCacheType::f16)
    static_cast<std::uint16_t*>(cache)[index] = float_to_fp16(value);
  else
    static_cast<float*>(cache)[index] = value;
}

class ReferenceBackend final : public Backend {
 public:
  ReferenceBackend(std::shared_ptr<const model::GgufFile> file, const model::ModelConfig& config,
                   const BackendOptions& options)
      : file_(std::move(file)), config_(config), threads_(options.threads) {
    const model::LlamaWeights w = model::map_llama_weights(*file_, config_);
    check_fits(plan_memory(config_, GemmPrecision::fp32), available_memory(), config_);
    if (options.progress) options.progress->plan({{LoadPhase::weights, 1}});  // nothing else to do
    token_embd_ = w.token_embd;
    output_ = load_matrix(*w.output);
    output_norm_ = load_vector(w.output_norm, config_.embedding);
    const int q_dim = config_.heads * config_.head_dim, kv_dim = config_.kv_heads * config_.head_dim;
    for (std::size_t l = 0; l < w.layers.size(); ++l) {
      const model::LayerWeights& lw = w.layers[l];
      Layer layer;
      layer.attn_norm = load_vector(lw.attn_norm, config_.embedding);
      layer.ffn_norm = load_vector(lw.ffn_norm, config_.embedding);
      if (lw.q_norm != nullptr) {
        layer.q_norm = load_vector(lw.q_norm, config_.head_dim);
        layer.k_norm = load_vector(lw.k_norm, config_.head_dim);
      }
      if (lw.post_attn_norm != nullptr) {
        layer.post_attn_norm = load_vector(lw.post_attn_norm, config_.embedding);
        layer.post_ffn_norm = load_vector(lw.post_ffn_norm, config_.embedding);
      }
      layer.wq = load_matrix(*lw.wq);
      layer.wk = load_matrix(*lw.wk);
      layer.wv = load_matrix(*lw.wv);
      layer.wo = load_matrix(*lw.wo);
      layer.bq = load_vector(lw.bq, q_dim);
      layer.bk = load_vector(lw.bk, kv_dim);
      layer.bv = load_vector(lw.bv, kv_dim);
      layer.w_gate = load_matrix(*lw.w_gate);
      layer.w_up = load_matrix(*lw.w_up);
      layer.w_down = load_matrix(*lw.w_down);
      layers_.push_back(std::move(layer));
      if (options.progress) options.progress->report(LoadPhase::weights, static_cast<float>(l + 1) / w.layers.size());
    }
  }

  const model::ModelConfig& config() const override { return config_; }
  std::string name() const override { return "cpu-fp32-reference"; }

  void forward(const Batch& batch, KvCache& kv, std::vector<float>& logits) override {
    const KvGeometry& g = kv.geometry();
    validate_batch(batch, g.block_count, g.block_size, config_.vocab);
    if (threads_ > 0) omp_set_num_threads(threads_);  // this thread's parallel regions only
    const int rows = batch.rows(), d = config_.embedding, hd = config_.head_dim;

    // 1. Token embeddings (Gemma scales them by sqrt(d)).
    Matrix x(rows, d);
    for (int r = 0; r < rows; ++r)
      model::dequantize_row(*token_embd_, batch.tokens[static_cast<std::size_t>(r)], x.row(r).data());
    x *= config_.embedding_scale;

    Matrix h, q, k, v, attn(rows, config_.heads * hd), gate, up, out;
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const Layer& layer = layers_[l];
      const int li = static_cast<int>(l);
      // 2. Attention block: norm, projections, [q/k norm], RoPE, cache write, attention, output,
      // [post-norm], residual.
      rmsnorm(h, x, layer.attn_norm, config_.rms_eps);
      q = (h * layer.wq.transpose()).rowwise() + layer.bq.transpose();
      k = (h * layer.wk.transpose()).rowwise() + layer.bk.transpose();
      v = (h * layer.wv.transpose()).rowwise() + layer.bv.transpose();
      for (int r = 0; r < rows; ++r) {
        if (config_.qk_norm) {
          rmsnorm_heads(q.row(r).data(), config_.heads, hd, layer.q_norm, config_.rms_eps);
          rmsnorm_heads(k.row(r).data(), config_.kv_heads, hd, layer.k_norm, config_.rms_eps);
        }
        const int pos = batch.positions[static_cast<std::size_t>(r)];
        for (int head = 0; head < config_.heads; ++head) rope(q.row(r).data() + head * hd, pos, config_, li);
        for (int head = 0; head < config_.kv_heads; ++head) rope(k.row(r).data() + head * hd, pos, config_, li);
        // The slot's K/V: element (slot, kv_head, i) of the layer's [blocks*block_size, kv_heads, hd].
        const std::size_t base = static_cast<std::size_t>(batch.slots[static_cast<std::size_t>(r)]) *
                                 static_cast<std::size_t>(config_.kv_heads * hd);
        for (int i = 0; i < config_.kv_heads * hd; ++i) {
          store_kv(kv.keys(static_cast<int>(l)), g.type, base + i, k(r, i));
          store_kv(kv.values(static_cast<int>(l)), g.type, base + i, v(r, i));
        }
      }
      attention(batch, kv, li, q, attn);
      out = attn * layer.wo.transpose();
      if (config_.post_norms) rmsnorm(out, Matrix(out), layer.post_attn_norm, config_.rms_eps);
      x += out;

      // 3. Feed-forward block: norm, act(gate) * up (SwiGLU or GeGLU), down projection,
      // [post-norm], residual.
      rmsnorm(h, x, layer.ffn_norm, config_.rms_eps);
      gate = h * layer.w_gate.transpose();
      up = h * layer.w_up.transpose();
      const bool geglu = config_.feed_forward == model::FeedForward::geglu;
      for (Eigen::Index i = 0; i < gate.size(); ++i) {
        const float g_i = gate.data()[i];
        const float act = geglu ? gelu(g_i) : g_i / (1.0f + std::exp(-g_i));  // gelu or silu
        gate.data()[i] = act * up.data()[i];
      }
      out = gate * layer.w_down.transpose();
      if (config_.post_norms) rmsnorm(out, Matrix(out), layer.post_ffn_norm, config_.rms_eps);
      x += out;
    }

    // 4. Final norm and the vocabulary projection, only for rows that need logits.
    const int n_out = static_cast<int>(batch.logit_rows.size());
    Matrix selected(n_out, d);
    for (int i = 0; i < n_out; ++i) selected.row(i) = x.row(batch.logit_rows[static_cast<std::size_t>(i)]);
    rmsnorm(h, selected, output_norm_, config_.rms_eps);
    logits.resize(static_cast<std::size_t>(n_out) * config_.vocab);
    Eigen::Map<Matrix>(logits.data(), n_out, config_.vocab) = h * output_.transpose();
  }

 private:
  // Causal attention of every row over its sequence's cached positions 0..position (on a
  // sliding layer only the last `window` of them): for each KV head, gather the sequence's keys
  // and values from their blocks into dense matrices, then scores = K q / sqrt(hd), softmax,
  // out = Vᵀ p. Grouped-query attention: query head h reads KV head h / (heads / kv_heads).
  void attention(const Batch& batch, const KvCache& kv, int layer, const Matrix& q, Matrix& out) const {
    const KvGeometry& g = kv.geometry();
    const int hd = config_.head_dim, group = config_.heads / config_.kv_heads;
    const float scale = config_.attention_scale > 0.0f ? config_.attention_scale
                                                       : 1.0f / std::sqrt(static_cast<float>(hd));
    const int window = config_.attention_window(layer);
    Matrix keys, values;
    for (const SequenceSlice& seq : batch.sequences) {
      const int last = seq.row_begin + seq.row_count - 1;
      const int length = batch.positions[static_cast<std::size_t>(last)] + 1;
      for (int kv_head = 0; kv_head < config_.kv_heads; ++kv_head) {
        keys.resize(length, hd);
        values.resize(length, hd);
        for (int t = 0; t < length; ++t) {
          const int block = seq.block_table[static_cast<std::size_t>(t / g.block_size)];
          const std::size_t slot = static_cast<std::size_t>(block) * g.block_size + t % g.block_size;
          const std::size_t base = (slot * g.kv_heads + kv_head) * hd;
          for (int i = 0; i < hd; ++i) {
            keys(t, i) = load_kv(kv.keys(layer), g.type, base + i);
            values(t, i) = load_kv(kv.values(layer), g.type, base + i);
          }
        }
        for (int r = seq.row_begin; r <= last; ++r) {
          const int visible = batch.positions[static_cast<std::size_t>(r)] + 1;  // causal mask
          const int first = window > 0 ? std::max(0, visible - window) : 0;   // sliding window
          const int seen = visible - first;
          for (int head = kv_head * group; head < (kv_head + 1) * group; ++head) {
            const Eigen::Map<const Vector> qh(q.row(r).data() + head * hd, hd);
            Vector p = keys.middleRows(first, seen) * qh * scale;
            p = (p.array() - p.maxCoeff()).exp();
            p /= p.sum();
            Eigen::Map<Vector>(out.row(r).data() + head * hd, hd) = values.middleRows(first, seen).transpose() * p;
          }
        }
      }
    }
  }

  std::shared_ptr<const model::GgufFile> file_;  // keeps token_embd_ mapped
  model::ModelConfig config_;
  int threads_;
  const model::GgufTensor* token_embd_ = nullptr;  // rows dequantized on lookup
  Matrix output_;
  Vector output_norm_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend(std::shared_ptr<const model::GgufFile> file,
                                                const model::ModelConfig& config,
                                                const BackendOptions& options) {
  return std::make_unique<ReferenceBackend>(std::move(file), config, options);
}

}  // namespace ember::backend::cpu
