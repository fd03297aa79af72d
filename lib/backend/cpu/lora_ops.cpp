#include "backend/cpu/lora_ops.hpp"

#include <algorithm>

namespace ember::backend::cpu {
namespace {

using model::LoraPair;
using model::WeightId;
using model::WeightRef;

// y[c] += scale * B[c - row_offset] · (A x) for the columns c in [c0, c1) of the pair's rows.
// `down` holds A x on return. The sums run in one fixed order per row, so a row's result does
// not depend on the batch around it.
void lora_row(const LoraPair& p, const float* x, float* y, std::int64_t c0, std::int64_t c1, float scale,
              std::vector<float>& down) {
  down.resize(static_cast<std::size_t>(p.rank));
  for (std::int64_t j = 0; j < p.rank; ++j) {
    const float* a = p.a.data() + j * p.cols;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < p.cols; ++i) sum += a[i] * x[i];
    down[static_cast<std::size_t>(j)] = sum;
  }
  for (std::int64_t c = c0; c < c1; ++c) {
    const float* b = p.b.data() + (c - p.row_offset) * p.rank;
    float sum = 0.0f;
    for (std::int64_t j = 0; j < p.rank; ++j) sum += b[j] * down[static_cast<std::size_t>(j)];
    y[c] += scale * sum;
  }
}

// The divisor smoothing applied to output row `row` of weight `id` (1: none).
float output_divisor(const CpuWeights& weights, const model::ModelConfig& c, int layer, WeightId id,
                     std::int64_t row) {
  if (layer < 0) return 1.0f;
  if (id == WeightId::qkv) {  // V rows carry the output projection's factors (shared per KV head)
    const std::vector<float>& s = weights[{layer, WeightId::wo}].smoothing;
    const std::int64_t hd = c.head_dim, q_dim = std::int64_t{c.heads} * hd, kv_dim = std::int64_t{c.kv_heads} * hd;
    if (s.empty() || row < q_dim + kv_dim) return 1.0f;
    const std::int64_t v = row - q_dim - kv_dim, group = c.heads / c.kv_heads;
    return s[static_cast<std::size_t>((v / hd) * group * hd + v % hd)];
  }
  if (id == WeightId::gate_up) {  // up rows carry the down projection's factors
    const std::vector<float>& s = weights[{layer, WeightId::down}].smoothing;
    if (s.empty() || row < c.ffn) return 1.0f;
    return s[static_cast<std::size_t>(row - c.ffn)];
  }
  return 1.0f;
}

void prepare_pair(LoraPair& p, const CpuWeights& weights, const model::ModelConfig& c, WeightRef ref) {
  const std::vector<float>& s = weights[ref].smoothing;
  if (!s.empty())
    for (std::int64_t j = 0; j < p.rank; ++j)
      for (std::int64_t i = 0; i < p.cols; ++i) p.a[static_cast<std::size_t>(j * p.cols + i)] *= s[static_cast<std::size_t>(i)];
  for (std::int64_t r = 0; r < p.rows; ++r) {
    const float d = output_divisor(weights, c, ref.layer, ref.id, p.row_offset + r);
    if (d != 1.0f)
      for (std::int64_t j = 0; j < p.rank; ++j) p.b[static_cast<std::size_t>(r * p.rank + j)] /= d;
  }
}

}  // namespace

std::shared_ptr<const model::LoraAdapter> prepare_lora(const model::LoraAdapter& adapter, const CpuWeights& weights,
                                                       const model::ModelConfig& config) {
  auto out = std::make_shared<model::LoraAdapter>(adapter);
  for (int l = -1; l < config.layers; ++l)
    for (int id = 0; id < model::kWeightIdCount; ++id) {
      const WeightRef ref{l, static_cast<WeightId>(id)};
      for (LoraPair& p : out->pairs(ref)) prepare_pair(p, weights, config, ref);
    }
  return out;
}

void CpuOps::apply_lora(WeightRef weight, model::Activation in, model::Activation out, std::int64_t rows,
                        std::int64_t begin, std::int64_t end) {
  const float* x = at(in);
  float* y = at(out);
  const std::int64_t in_width = width(in), out_width = width(out);
  // The lm_head runs over the logit rows only: row i is the step's row logit_rows[i].
  const bool logit_rows = weight.id == WeightId::lm_head;
  for (const SequenceSlice& s : batch_->sequences)
    for (const LoraUse& use : s.adapters)
      for (const LoraPair& p : use.adapter->pairs(weight)) {
        const std::int64_t c0 = std::max(begin, p.row_offset), c1 = std::min(end, p.row_offset + p.rows);
        if (c0 >= c1) continue;
        const float scale = use.scale * p.scale;
        for (std::int64_t r = 0; r < rows; ++r) {
          const std::int64_t row = logit_rows ? batch_->logit_rows[static_cast<std::size_t>(r)] : r;
          if (row < s.row_begin || row >= s.row_begin + s.row_count) continue;
          lora_row(p, x + r * in_width, y + r * out_width, c0, c1, scale, lora_down_);
        }
      }
}

}  // namespace ember::backend::cpu
