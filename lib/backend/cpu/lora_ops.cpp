#include "backend/cpu/lora_ops.hpp"

#include <algorithm>

namespace ember::backend::cpu {
namespace {

using model::LoraPair;
using model::WeightId;
using model::WeightRef;

// a · b in eight interleaved partial sums, added up in one fixed order: the compiler can keep
// the lanes in a vector register, and the result depends on the inputs only (never on the batch
// or the machine), as batch invariance needs.
float dot(const float* a, const float* b, std::int64_t n) {
  constexpr int kLanes = 8;
  float lane[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += a[i + l] * b[i + l];
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7])) + tail;
}

// y[c] += scale * B[c - row_offset] · (A x) for the columns c in [c0, c1) of the pair's rows;
// `down` holds A x.
void lora_row(const LoraPair& p, const float* x, float* y, std::int64_t c0, std::int64_t c1, float scale, float* down) {
  for (std::int64_t j = 0; j < p.rank; ++j) down[j] = dot(p.a.data() + j * p.cols, x, p.cols);
  for (std::int64_t c = c0; c < c1; ++c) y[c] += scale * dot(p.b.data() + (c - p.row_offset) * p.rank, down, p.rank);
}

// The divisor smoothing applied to output row `row` of weight `id` (1: none).
float output_divisor(const CpuWeights& weights, const model::ModelConfig& c, int layer, WeightId id, std::int64_t row) {
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
      for (std::int64_t i = 0; i < p.cols; ++i)
        p.a[static_cast<std::size_t>(j * p.cols + i)] *= s[static_cast<std::size_t>(i)];
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
  std::int64_t max_rank = 0;  // of the pairs on this weight: 0, none (most weights of a q/v adapter)
  for (const SequenceSlice& s : batch_->sequences)
    for (const LoraUse& use : s.adapters)
      for (const LoraPair& p : use.adapter->pairs(weight)) max_rank = std::max(max_rank, p.rank);
  if (max_rank == 0) return;
  if (static_cast<std::int64_t>(lora_down_.size()) < max_rank * rows)
    lora_down_.resize(static_cast<std::size_t>(max_rank * rows));
  float* down = lora_down_.data();
  // Rows are independent (each its own A x): split across the compute threads. A row takes its
  // sequence's adapters in order, so its sums never depend on the rows around it.
#pragma omp parallel for num_threads(ctx_.threads) schedule(static) if (rows > 1)
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t row = logit_rows ? batch_->logit_rows[static_cast<std::size_t>(r)] : r;
    const std::int32_t seq = lora_sequence_[static_cast<std::size_t>(row)];
    if (seq < 0) continue;
    for (const LoraUse& use : batch_->sequences[static_cast<std::size_t>(seq)].adapters)
      for (const LoraPair& p : use.adapter->pairs(weight)) {
        const std::int64_t c0 = std::max(begin, p.row_offset), c1 = std::min(end, p.row_offset + p.rows);
        if (c0 < c1) lora_row(p, x + r * in_width, y + r * out_width, c0, c1, use.scale * p.scale, down + r * max_rank);
      }
  }
}

}  // namespace ember::backend::cpu
