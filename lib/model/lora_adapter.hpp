// LoRA adapters in llama.cpp's GGUF format (general.type "adapter", adapter.type "lora"): for a
// base matrix W ([out, in]) the file holds "<W's tensor name>.lora_a" (ggml shape [in, rank]:
// rank rows of `in`) and ".lora_b" ([rank, out]: out rows of `rank`), and the adapted product
// is, as in llama.cpp's build_lora_mm,
//
//   y = W x + scale * B (A x),   scale = user_scale * alpha / rank  (alpha 0: user_scale)
//
// with alpha the file's adapter.lora.alpha and rank B's row width. ember maps each pair onto the
// graph's weights (model/decoder_graph.hpp): a fused weight (Q|K|V, gate|up) gets one pair per
// source tensor, at that source's rows. The attention and feed-forward matrices and an untied
// lm_head ("output.weight") may carry adapters; token_embd, experts and routers are refused by
// name, and norm vectors ("*_norm.weight", which llama.cpp also skips) are ignored.
//
// Thread-safety: a LoraAdapter is immutable once built; any number of threads may read it.
#pragma once

#include "model/decoder_graph.hpp"
#include "model/gguf.hpp"
#include "model/model_config.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace ember::model {

// One base tensor's low-rank update, placed in its graph weight: rows [row_offset,
// row_offset + rows) of the weight's output get scale * B (A x).
struct LoraPair {
  std::string tensor;  // the base tensor's name
  std::int64_t row_offset = 0, rows = 0, cols = 0, rank = 0;
  std::vector<float> a;  // [rank, cols], row-major
  std::vector<float> b;  // [rows, rank], row-major
  float scale = 1.0f;    // alpha / rank, or 1 when alpha is 0 (times the request's scale)
};

class LoraAdapter {
 public:
  LoraAdapter(int layers, std::string path, float alpha) : pairs_(layers), path_(std::move(path)), alpha_(alpha) {}

  // The pairs on weight `ref` (empty when the adapter leaves it alone).
  const std::vector<LoraPair>& pairs(WeightRef ref) const { return pairs_[ref]; }
  std::vector<LoraPair>& pairs(WeightRef ref) { return pairs_[ref]; }
  const std::string& path() const { return path_; }
  float alpha() const { return alpha_; }
  int tensor_count() const { return tensor_count_; }  // base tensors adapted
  int max_rank() const { return max_rank_; }
  void add(WeightRef ref, LoraPair pair);

 private:
  WeightTable<std::vector<LoraPair>> pairs_;
  std::string path_;
  float alpha_ = 0.0f;
  int tensor_count_ = 0;
  int max_rank_ = 0;
};

// Reads and checks `adapter` against the base model (its architecture, and each pair's shapes
// against the base tensor it names). Every problem is an Error: invalid_model for a malformed
// adapter (wrong general.type or adapter.type, a lone lora_a or lora_b, an unexpected tensor
// name, shapes that do not fit the base), unsupported for a tensor ember does not adapt.
LoraAdapter read_lora_adapter(const GgufFile& adapter, const ModelConfig& config, const DecoderTensors& base);

}  // namespace ember::model
